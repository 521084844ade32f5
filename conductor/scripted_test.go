package conductor

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A scripted component is one the test plays itself, line by line, where
// the order of what each side sends is the point of the test (a cancel
// that must follow its request). The component is this binary in the
// "pipe" role, joining its stdio to a Unix socket the test listens on.

// runPipe is the "pipe" role: stdin to the socket, the socket to stdout.
// With ACP_TEST_PIPE_EXIT set, the end of what the test sends closes
// stdout, and the process exits with that status: at once, or with
// ACP_TEST_PIPE_LINGER set, once its stdin ends.
func runPipe() {
	c, err := net.Dial("unix", os.Getenv("ACP_TEST_SOCKET"))
	if err != nil {
		os.Exit(9)
	}
	inputDone := make(chan struct{})
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.UnixConn).CloseWrite()
		close(inputDone)
	}()
	io.Copy(os.Stdout, c)
	if code, ok := os.LookupEnv("ACP_TEST_PIPE_EXIT"); ok {
		os.Stdout.Close()
		if os.Getenv("ACP_TEST_PIPE_LINGER") != "" {
			<-inputDone
		}
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
}

// scripted is one side of a conversation the test plays.
type scripted struct {
	t     *testing.T
	name  string
	w     io.WriteCloser
	lines chan []byte
}

func newScripted(t *testing.T, name string, r io.Reader, w io.WriteCloser) *scripted {
	s := &scripted{t: t, name: name, w: w, lines: make(chan []byte, 64)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	return s
}

func (s *scripted) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.w, line+"\n"); err != nil {
		s.t.Fatalf("%s: send: %v", s.name, err)
	}
}

// recvLine returns the next line, failing the test after a generous
// bound rather than hanging.
func (s *scripted) recvLine() []byte {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("%s: its input ended", s.name)
		}
		return l
	case <-time.After(20 * time.Second):
		s.t.Fatalf("%s: nothing arrived", s.name)
		return nil
	}
}

// recvMsg returns the next message.
func (s *scripted) recvMsg() *wire.Message {
	s.t.Helper()
	l := s.recvLine()
	m, err := wire.Parse(l)
	if err != nil {
		s.t.Fatalf("%s: %v: %s", s.name, err, l)
	}
	return m
}

// reply answers m with result.
func (s *scripted) reply(m *wire.Message, result string) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
}

// scriptedComponent returns a component the test plays, and a function
// that returns its side once the conductor has started it.
func scriptedComponent(t *testing.T, dir, name string) (Component, func() *scripted) {
	t.Helper()
	sock := filepath.Join(dir, name+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	comp := Component{Name: name, Command: exe, Env: map[string]string{
		"ACP_TEST_ROLE": "pipe", "ACP_TEST_SOCKET": sock, "GORACE": "atexit_sleep_ms=0"}}
	return comp, func() *scripted {
		t.Helper()
		ln.SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatalf("%s never started: %v", name, err)
		}
		t.Cleanup(func() { c.Close() })
		return newScripted(t, name, c, c)
	}
}

// scriptedEditor is the editor of a running chain as a scripted side.
func scriptedEditor(e *editor) *scripted {
	r, w := io.Pipe()
	go func() {
		for {
			l, err := e.ch.Recv()
			if err != nil {
				w.Close()
				return
			}
			w.Write(append(l, '\n'))
		}
	}()
	return newScripted(e.t, "editor", r, e.in)
}

// startShim runs the stdio MCP server the agent was declared (a bridged
// one: this binary's mcp-shim) as the agent's MCP client would, and
// returns the client's side of it. Closing its writer ends the client.
func startShim(t *testing.T, decl json.RawMessage) *scripted {
	t.Helper()
	cmd := shimCommand(t, decl)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return newScripted(t, "shim", out, in)
}

// shimCommand is the command of a declared stdio MCP server.
func shimCommand(t *testing.T, decl json.RawMessage) *exec.Cmd {
	t.Helper()
	var d struct {
		Command string
		Args    []string
		Env     []struct{ Name, Value string }
	}
	if err := json.Unmarshal(decl, &d); err != nil {
		t.Fatalf("declaration %s: %v", decl, err)
	}
	cmd := exec.Command(d.Command, d.Args...)
	cmd.Env = os.Environ()
	for _, kv := range d.Env {
		cmd.Env = append(cmd.Env, kv.Name+"="+kv.Value)
	}
	return cmd
}

// mcpChain starts editor, conductor and a scripted agent that answers
// initialize with mcpCapabilities, and opens session s1 with the editor's
// acp MCP server srv-1. It returns the editor, the agent and what the agent
// was declared in its place.
func mcpChain(t *testing.T, mcpCapabilities string, bridge BridgeMode) (ed, ag *scripted, declared json.RawMessage) {
	t.Helper()
	return mcpChainWith(t, mcpCapabilities, Config{MCPBridge: bridge})
}

// mcpChainWith is mcpChain with the rest of the chain's configuration
// (a trace, say) in cfg; its agent is the scripted one.
func mcpChainWith(t *testing.T, mcpCapabilities string, cfg Config) (ed, ag *scripted, declared json.RawMessage) {
	t.Helper()
	ed, ag, setUp := mcpSetUp(t, mcpCapabilities, cfg, `"srv-1"`)
	return ed, ag, oneServer(t, setUp)
}

// mcpSetUp is mcpChainWith with the editor's server declared under id
// (JSON, spelled as the editor would), for tests of how ids are written;
// it returns the session/new the agent got, answered.
func mcpSetUp(t *testing.T, mcpCapabilities string, cfg Config, id string) (ed, ag *scripted, setUp *wire.Message) {
	t.Helper()
	comp, started := scriptedComponent(t, t.TempDir(), "agent")
	cfg.Agent = comp
	ed = scriptedEditor(startChain(t, cfg))
	ag = started()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":`+mcpCapabilities+`}}`)
	ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":` + id + `}]}}`)
	setUp = ag.recvMsg()
	ag.reply(setUp, `{"sessionId":"s1"}`)
	ed.recvMsg()
	return ed, ag, setUp
}

// agentChain starts editor, conductor and a scripted agent, and has the
// agent answer the editor's initialize.
func agentChain(t *testing.T) (ed, ag *scripted) {
	t.Helper()
	comp, started := scriptedComponent(t, t.TempDir(), "agent")
	ed = scriptedEditor(startChain(t, Config{Agent: comp}))
	ag = started()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	ed.recvMsg()
	return ed, ag
}

// oneServer returns the one MCP server the session set-up m declares to
// the agent, failing the test if it declares any other number.
func oneServer(t *testing.T, m *wire.Message) json.RawMessage {
	t.Helper()
	var servers []json.RawMessage
	json.Unmarshal(wire.Member(m.Params, "mcpServers"), &servers)
	if len(servers) != 1 {
		t.Fatalf("the agent was declared %s, want one server", wire.Member(m.Params, "mcpServers"))
	}
	return servers[0]
}
