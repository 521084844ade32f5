// Command sdkagent is the ACP agent of the MCP integration tests: a minimal
// agent, in plain encoding/json, whose MCP client is the official MCP Go
// SDK's. It uses the MCP servers it is given exactly as an agent would.
//
//	sdkagent [--advertise none|http|acp|acp,http]
//
// On initialize it advertises agentCapabilities.mcpCapabilities as
// --advertise says (default none: stdio only). On session/new it keeps the
// session's mcpServers and cwd. Each session/prompt is one JSON object,
//
//	{"server": NAME, "tool": TOOL, "name": WHO, "protocol": MCP_REVISION, "noProgress": BOOL, "cancel": BOOL}
//
// for which it connects an SDK client (mcp.NewClient, with the session's cwd
// as its one root and a progress handler) to the declared server NAME:
//
//   - a stdio declaration ({command, args, env}): mcp.CommandTransport running
//     the command with the args, in the agent's environment plus the
//     declaration's;
//   - an http declaration ({type: http, url, headers}):
//     mcp.StreamableClientTransport on the URL, sending the headers;
//   - an acp declaration ({type: acp, id}), only if it advertised acp: a
//     transport of its own (acpTransport) that carries the SDK's messages in
//     mcp/connect, mcp/message and mcp/disconnect on the agent's own ACP
//     connection.
//
// Then it lists the tools, calls TOOL with {"name": WHO} and a progress
// token, waits for the progress notification (unless noProgress), closes
// the session (which disconnects), and reports everything as one
// agent_message_chunk whose text is a JSON report (see the report type),
// before answering end_turn. PROTOCOL, if given, is the MCP revision the
// client asks for; empty means the SDK's latest. With cancel, it cancels
// the call (its context) once the progress notification comes, expects the
// call to end so, and then calls the tool "waited" and reports its result
// (toolproxy's wait and waited). With ping, it pings the server first.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// msg is any JSON-RPC message.
type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("[%d] %s", e.Code, e.Message) }

type agent struct {
	acp, http bool // what it advertises

	ctx  context.Context // done when the input ends
	done context.CancelFunc

	wmu sync.Mutex
	out *bufio.Writer

	mu       sync.Mutex
	lastID   int
	pending  map[string]func(*msg) // answer handlers, by our requests' ids
	sessions map[string]*session
	conns    map[string]*acpConn // native MCP connections, by connectionId

	prompts sync.WaitGroup
}

type session struct {
	cwd     string
	servers []json.RawMessage // the mcpServers of session/new, as given
}

func main() {
	log.SetFlags(0)
	log.SetPrefix(fmt.Sprintf("[sdkagent %d] ", os.Getpid()))
	advertise := flag.String("advertise", "none", "mcpCapabilities to advertise: none, or a comma list of http and acp")
	flag.Parse()
	a := &agent{
		out:      bufio.NewWriter(os.Stdout),
		pending:  map[string]func(*msg){},
		sessions: map[string]*session{},
		conns:    map[string]*acpConn{},
	}
	for _, c := range strings.Split(*advertise, ",") {
		switch c {
		case "none":
		case "acp":
			a.acp = true
		case "http":
			a.http = true
		default:
			log.Fatalf("--advertise: unknown capability %q", c)
		}
	}
	a.ctx, a.done = context.WithCancel(context.Background())
	log.Printf("started; advertising acp=%v http=%v", a.acp, a.http)

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			log.Printf("unexpected: dropping a line that is not JSON-RPC: %v", err)
			continue
		}
		a.handle(&m)
	}
	if err := sc.Err(); err != nil {
		log.Printf("unexpected: reading stdin: %v", err)
	}
	log.Print("stdin closed; exiting")
	a.done()
	a.prompts.Wait()
}

func (a *agent) send(m *msg) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		log.Fatalf("encoding %+v: %v", m, err)
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.out.Write(append(b, '\n'))
	if err := a.out.Flush(); err != nil {
		log.Printf("unexpected: writing: %v", err)
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	a.send(&msg{ID: id, Result: mustJSON(result)})
}

// request sends a request and has onAnswer called, on the reader, with the
// answer. It returns the request's id.
func (a *agent) request(method string, params any, onAnswer func(*msg)) json.RawMessage {
	a.mu.Lock()
	a.lastID++
	id := json.RawMessage(fmt.Sprintf(`"agent-%d"`, a.lastID))
	a.pending[string(id)] = onAnswer
	a.mu.Unlock()
	a.send(&msg{ID: id, Method: method, Params: mustJSON(params)})
	return id
}

// call sends a request and waits for its answer.
func (a *agent) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	answer := make(chan *msg, 1)
	a.request(method, params, func(m *msg) { answer <- m })
	select {
	case m := <-answer:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	case <-a.ctx.Done():
		return nil, fmt.Errorf("%s: the input ended", method)
	}
}

// handle deals with one incoming message, on the reader.
func (a *agent) handle(m *msg) {
	switch m.Method {
	case "":
		a.mu.Lock()
		fn := a.pending[string(m.ID)]
		delete(a.pending, string(m.ID))
		a.mu.Unlock()
		if fn == nil {
			log.Printf("unexpected: an answer to no request of ours: %s", m.ID)
			return
		}
		fn(m)
	case "initialize":
		a.reply(m.ID, map[string]any{
			"protocolVersion": 1,
			"agentCapabilities": map[string]any{
				"mcpCapabilities": map[string]bool{"acp": a.acp, "http": a.http},
			},
			"agentInfo":   map[string]string{"name": "sdkagent", "version": "1.0.0"},
			"authMethods": []any{},
		})
	case "session/new":
		var p struct {
			Cwd        string            `json:"cwd"`
			MCPServers []json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			a.send(&msg{ID: m.ID, Error: &rpcError{Code: -32602, Message: err.Error()}})
			return
		}
		a.mu.Lock()
		id := fmt.Sprintf("sdkagent-session-%d", len(a.sessions)+1)
		a.sessions[id] = &session{cwd: p.Cwd, servers: p.MCPServers}
		a.mu.Unlock()
		log.Printf("session %s: mcpServers %s", id, mustJSON(p.MCPServers))
		a.reply(m.ID, map[string]string{"sessionId": id})
	case "session/prompt":
		a.prompts.Go(func() { a.prompt(m) })
	case "mcp/message":
		a.toConn(m)
	default:
		if m.ID != nil {
			a.send(&msg{ID: m.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + m.Method}})
		}
	}
}

// A report is what a prompt found, as the JSON text of its one update.
type report struct {
	// Declaration is the mcpServers entry used, as the agent received it.
	Declaration json.RawMessage `json:"declaration,omitempty"`
	Transport   string          `json:"transport,omitempty"` // stdio, http or acp
	Protocol    string          `json:"protocol,omitempty"`  // the MCP revision negotiated
	ServerName  string          `json:"serverName,omitempty"`
	Tools       []string        `json:"tools,omitempty"`
	Result      string          `json:"result,omitempty"`
	IsError     bool            `json:"isError,omitempty"`
	// Progress holds the messages of the progress notifications received.
	Progress []string `json:"progress,omitempty"`
	// ServerRequests and ServerNotifications are the methods of the
	// requests and notifications the server sent, as the transport read
	// them.
	ServerRequests      []string `json:"serverRequests,omitempty"`
	ServerNotifications []string `json:"serverNotifications,omitempty"`
	// Closed is true once ClientSession.Close has returned, and CloseError
	// what it returned.
	Closed     bool   `json:"closed"`
	CloseError string `json:"closeError,omitempty"`
	// Disconnect is how the connection ended on the agent's side: for acp,
	// the answer to mcp/disconnect; for stdio, how the command exited.
	Disconnect string `json:"disconnect,omitempty"`
	// Ping is "ok" once the client's ping was answered, else its error,
	// when the prompt asked for one.
	Ping string `json:"ping,omitempty"`
	// Error is the first thing that failed.
	Error string `json:"error,omitempty"`
}

func (a *agent) prompt(m *msg) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct{ Type, Text string }
	}
	_ = json.Unmarshal(m.Params, &p)
	var rep report
	defer func() {
		a.send(&msg{Method: "session/update", Params: mustJSON(map[string]any{
			"sessionId": p.SessionID,
			"update": map[string]any{
				"sessionUpdate": "agent_message_chunk",
				"content":       map[string]string{"type": "text", "text": string(mustJSON(rep))},
			},
		})})
		a.reply(m.ID, map[string]string{"stopReason": "end_turn"})
	}()
	var req struct {
		Server   string `json:"server"`
		Tool     string `json:"tool"`
		Name     string `json:"name"`
		Protocol string `json:"protocol"`
		// NoProgress: do not wait for the progress notification, from a
		// conductor that does not carry the server's notifications to the
		// client (@thinkwell/conductor sends them on to the agent).
		NoProgress bool `json:"noProgress"`
		Cancel     bool `json:"cancel"`
		// Ping: ping the server once connected, as a keep-alive would.
		Ping bool `json:"ping"`
	}
	if len(p.Prompt) == 0 || json.Unmarshal([]byte(p.Prompt[len(p.Prompt)-1].Text), &req) != nil {
		rep.Error = "the prompt is not a tool request"
		return
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	a.mu.Unlock()
	if s == nil {
		rep.Error = "no session " + p.SessionID
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, 60*time.Second)
	defer cancel()
	if err := a.useTool(ctx, s, req.Server, req.Tool, req.Name, req.Protocol, !req.NoProgress, req.Cancel, req.Ping, &rep); err != nil {
		rep.Error = err.Error()
		log.Printf("unexpected: the prompt failed: %v", err)
	}
}

// useTool does the MCP part of a prompt, filling in rep.
func (a *agent) useTool(ctx context.Context, s *session, server, tool, name, protocol string, waitProgress, cancelCall, ping bool, rep *report) error {
	var decl struct {
		Type    string
		Name    string
		ID      string
		Command string
		Args    []string
		Env     []struct{ Name, Value string }
		URL     string
		Headers []struct{ Name, Value string }
	}
	for _, raw := range s.servers {
		if json.Unmarshal(raw, &decl) == nil && decl.Name == server {
			rep.Declaration = raw
			break
		}
	}
	if rep.Declaration == nil {
		return fmt.Errorf("no MCP server %q in the session", server)
	}

	var transport mcp.Transport
	var native *acpTransport
	var cmd *exec.Cmd
	var httpTransport *http.Transport
	switch {
	case decl.Type == "acp":
		if !a.acp {
			return errors.New("an acp declaration, although the agent did not advertise mcpCapabilities.acp")
		}
		rep.Transport = "acp"
		native = &acpTransport{a: a, serverID: decl.ID}
		transport = native
	case decl.Type == "http":
		rep.Transport = "http"
		httpTransport = &http.Transport{}
		defer httpTransport.CloseIdleConnections()
		var rt http.RoundTripper = httpTransport
		if len(decl.Headers) > 0 {
			h := http.Header{}
			for _, kv := range decl.Headers {
				h.Add(kv.Name, kv.Value)
			}
			rt = withHeaders{h, httpTransport}
		}
		transport = &mcp.StreamableClientTransport{Endpoint: decl.URL, HTTPClient: &http.Client{Transport: rt}}
	case (decl.Type == "" || decl.Type == "stdio") && decl.Command != "":
		rep.Transport = "stdio"
		cmd = exec.Command(decl.Command, decl.Args...)
		cmd.Env = os.Environ()
		for _, kv := range decl.Env {
			cmd.Env = append(cmd.Env, kv.Name+"="+kv.Value)
		}
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	default:
		return fmt.Errorf("an MCP server declaration the agent cannot use: %s", rep.Declaration)
	}
	w := &watched{Transport: transport}

	var pmu sync.Mutex
	var progress []string // guarded by pmu
	progressed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "sdkagent", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			pmu.Lock()
			progress = append(progress, req.Params.Message)
			pmu.Unlock()
			select {
			case progressed <- struct{}{}:
			default:
			}
		},
	})
	client.AddRoots(&mcp.Root{URI: "file://" + s.cwd, Name: "cwd"})
	cs, err := client.Connect(ctx, w, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	closed := false
	closeSession := func() {
		if closed {
			return
		}
		closed = true
		if err := cs.Close(); err != nil {
			rep.CloseError = err.Error()
		}
		rep.Closed = true
		switch {
		case cmd != nil && cmd.ProcessState != nil:
			rep.Disconnect = cmd.ProcessState.String()
		case native != nil:
			rep.Disconnect = native.disconnected()
		}
		rep.ServerRequests, rep.ServerNotifications = w.seen()
		pmu.Lock()
		rep.Progress = slices.Clone(progress)
		pmu.Unlock()
	}
	defer closeSession()
	if init := cs.InitializeResult(); init != nil {
		rep.Protocol = init.ProtocolVersion
		if init.ServerInfo != nil {
			rep.ServerName = init.ServerInfo.Name
		}
	}

	if ping {
		rep.Ping = "ok"
		if err := cs.Ping(ctx, nil); err != nil {
			rep.Ping = err.Error()
		}
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	for _, t := range tools.Tools {
		rep.Tools = append(rep.Tools, t.Name)
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"name": name}}
	params.SetProgressToken("it-progress")
	if cancelCall {
		callCtx, cancel := context.WithCancel(ctx)
		go func() { // ends with the call
			select {
			case <-progressed:
				cancel()
			case <-callCtx.Done():
			}
		}()
		_, err := cs.CallTool(callCtx, params)
		cancel()
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("tools/call %s: %v; want it cancelled", tool, err)
		}
		params = &mcp.CallToolParams{Name: "waited"}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			rep.Result += t.Text
		}
	}
	rep.IsError = res.IsError
	if !waitProgress || cancelCall {
		return nil
	}
	// The notification was sent before the result, but not necessarily on
	// the same stream (HTTP), and the SDK delivers notifications on its own.
	select {
	case <-progressed:
	case <-ctx.Done():
		return errors.New("no progress notification before the deadline")
	}
	return nil
}

// withHeaders adds the declaration's headers to every request.
type withHeaders struct {
	h    http.Header
	base http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range w.h {
		r.Header[k] = vs
	}
	return w.base.RoundTrip(r)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatalf("encoding %v: %v", v, err)
	}
	return b
}
