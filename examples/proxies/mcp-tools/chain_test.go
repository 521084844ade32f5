package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestChain runs mcp-tools in a real chain: the acp-conductor binary built
// from this repository, with mcp-tools as its proxy and, as the agent,
// testdata/agent, which speaks MCP-over-ACP natively. The test plays the
// editor: each prompt asks the agent to call list_files through the server
// the proxy declared in its session, and the agent reports what it got.
// Two sessions in different directories each see their own.
func TestChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := t.TempDir()
	conductor := os.Getenv("ACP_IT_CONDUCTOR")
	if conductor == "" {
		conductor = goBuild(t, "../../..", filepath.Join(bin, "acp-conductor"), "./cmd/acp-conductor")
	}
	tools := goBuild(t, ".", filepath.Join(bin, "mcp-tools"), ".")
	agent := goBuild(t, ".", filepath.Join(bin, "agent"), "./testdata/agent")

	project := t.TempDir()
	for _, f := range []string{"README.md", "go.mod", "src/main.go", "src/util/util.go", "src/util/notes.txt"} {
		write(t, filepath.Join(project, f))
	}
	secret := filepath.Join(filepath.Dir(project), "secret.txt") // beside the project, not in it

	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, conductor, "agent", "--log-level", "warn",
		quote(tools)+" --name files", quote(agent))
	cmd.Stderr = &logs
	e := startEditor(t, cmd)
	defer func() {
		if t.Failed() {
			t.Logf("conductor log:\n%s", &logs)
		}
	}()

	init := e.request("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	var caps struct {
		AgentCapabilities struct {
			MCPCapabilities struct{ ACP bool } `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	json.Unmarshal(init.result, &caps)
	if !caps.AgentCapabilities.MCPCapabilities.ACP {
		t.Errorf("the chain does not advertise mcpCapabilities.acp: %s", init.result)
	}
	inProject := e.newSession(project)
	inSrc := e.newSession(filepath.Join(project, "src"))

	for _, tc := range []struct {
		session, prompt string
		want            []string
	}{
		{inProject, `{"server":"files","tool":"list_files"}`, []string{
			"server: mcp-tools", "tools: list_files",
			"result: " + project + ":\nREADME.md\ngo.mod\nsrc/\n"}},
		{inSrc, `{"server":"files","tool":"list_files"}`, []string{
			"server: mcp-tools", "tools: list_files",
			"result: " + filepath.Join(project, "src") + ":\nmain.go\nutil/\n"}},
		{inProject, `{"server":"files","tool":"list_files","connectWith":"serverId","arguments":{"path":"src","recursive":true,"pattern":"*.go"}}`, []string{
			"server: mcp-tools", "tools: list_files",
			"result: " + filepath.Join(project, "src") + ":\nmain.go\nutil/util.go\n"}},
		{inSrc, `{"server":"files","tool":"list_files","arguments":{"path":"../.."}}`, []string{
			"server: mcp-tools", "tools: list_files",
			"error: ../.. is outside the working directory " + filepath.Join(project, "src")}},
		{inProject, fmt.Sprintf(`{"server":"files","tool":"list_files","arguments":{"path":%q}}`, filepath.Dir(secret)), []string{
			"server: mcp-tools", "tools: list_files",
			"error: " + filepath.Dir(secret) + " is outside the working directory " + project}},
	} {
		r := e.request("session/prompt", map[string]any{
			"sessionId": tc.session,
			"prompt":    []map[string]string{{"type": "text", "text": tc.prompt}},
		})
		if got := strings.Join(r.updates, "\n--\n"); got != strings.Join(tc.want, "\n--\n") {
			t.Errorf("prompt %s in %s: the agent said\n%s\nwant\n%s", tc.prompt, tc.session, got, strings.Join(tc.want, "\n--\n"))
		}
	}

	if err := e.close(); err != nil {
		t.Errorf("the conductor exited with %v", err)
	}
}

// goBuild builds pkg in dir to out.
func goBuild(t *testing.T, dir, out, pkg string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// quote makes s one shell word, for the conductor's component strings.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// An editor drives the chain on the conductor's stdin and stdout.
type editor struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	lastID int
}

type answer struct {
	result  json.RawMessage
	updates []string // the text of every agent_message_chunk before the answer
}

func startEditor(t *testing.T, cmd *exec.Cmd) *editor {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &editor{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 100)}
	go func() {
		defer close(e.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			e.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return e
}

// request sends a request and waits for its answer, collecting the agent's
// message chunks meanwhile.
func (e *editor) request(method string, params any) answer {
	e.t.Helper()
	e.lastID++
	p, _ := json.Marshal(params)
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": e.lastID, "method": method, "params": json.RawMessage(p)})
	if _, err := e.stdin.Write(append(line, '\n')); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
	var a answer
	for line := range e.lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Update struct {
					Kind    string `json:"sessionUpdate"`
					Content struct{ Text string }
				} `json:"update"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			e.t.Fatalf("the chain sent %s: %v", line, err)
		}
		switch {
		case m.Method == "session/update" && m.Params.Update.Kind == "agent_message_chunk":
			a.updates = append(a.updates, m.Params.Update.Content.Text)
		case m.Method != "":
			e.t.Fatalf("unexpected %s", line)
		case string(m.ID) != fmt.Sprint(e.lastID):
			e.t.Fatalf("unexpected answer %s", line)
		case m.Error != nil:
			e.t.Fatalf("%s failed: %s", method, m.Error)
		default:
			a.result = m.Result
			return a
		}
	}
	e.t.Fatalf("the chain closed its output before answering %s", method)
	return a
}

func (e *editor) newSession(cwd string) string {
	e.t.Helper()
	r := e.request("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var s struct{ SessionID string }
	json.Unmarshal(r.result, &s)
	return s.SessionID
}

// close ends the chain as an editor does, by closing the conductor's stdin,
// and returns how it exited.
func (e *editor) close() error {
	e.stdin.Close()
	for range e.lines {
	}
	return e.cmd.Wait()
}
