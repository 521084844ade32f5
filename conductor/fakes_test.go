package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/proxy"
)

// The test binary doubles as the chain's components: TestMain runs one of
// these when ACP_TEST_ROLE is set. Each records every line it receives,
// byte for byte, to ACP_TEST_TRANSCRIPT if that is set.

func runFake(role string) {
	if role == "pipe" {
		runPipe() // the test plays it (scripted_test.go)
		return
	}
	if path := os.Getenv("ACP_TEST_STARTS"); path != "" {
		// Each start appends its pid, so tests can count starts.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	for env, then := range map[string]string{"ACP_TEST_MUTE_AFTER_FIRST": "mute", "ACP_TEST_CRASH_AFTER_FIRST": "crash", "ACP_TEST_REFUSE_AFTER_FIRST": "refuser"} {
		// A proxy whose restarts never answer, or exit at once: the first
		// run leaves a mark.
		if path := os.Getenv(env); path != "" {
			if _, err := os.Stat(path); err == nil {
				role = then
			} else {
				os.WriteFile(path, nil, 0o600)
			}
		}
	}
	if path := os.Getenv("ACP_TEST_LINGER_FIRST"); path != "" {
		// The first run closes its output at once, which fails it, and
		// lingers deaf to SIGTERM, noting each in the file it names.
		if _, err := os.Stat(path); err != nil {
			os.WriteFile(path, nil, 0o600)
			lingerNotingTERM(path)
		}
	}
	ch := wire.NewLineChannel(os.Stdin, os.Stdout, 0)
	var record *os.File
	if path := os.Getenv("ACP_TEST_TRANSCRIPT"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			panic(err)
		}
		record = f
	}
	send := func(m *wire.Message) {
		if err := ch.Send(m.Bytes()); err != nil {
			os.Exit(3)
		}
	}
	var handle func(*wire.Message)
	switch role {
	case "proxy":
		handle = fakeProxy(ch, send)
	case "agent":
		handle = fakeAgent(send)
	case "thinkwell":
		handle = fakeThinkwellProxy(ch, send)
	case "spoofer":
		handle = fakeSpoofer(ch, send)
	case "canceller":
		handle = fakeCanceller(send)
	case "mcp-owner":
		handle = fakeMCPOwner(ch, send)
	case "mcp-agent":
		handle = fakeMCPAgent(send)
	case "mcp-req-owner":
		handle = fakeRequestOwner(ch, send)
	case "mcp-req-agent":
		handle = fakeRequestAgent(send)
	case "mcp-many":
		handle = fakeManyMCPAgent(send)
	case "mcp-stdio-agent":
		handle = fakeStdioMCPAgent(send)
	case "streamer":
		handle = fakeStreamer(ch, send)
	case "conductor":
		// A proxy-mode conductor as a component, its one proxy a fake.
		exe, _ := os.Executable()
		proxies := []Component{{Name: "inner-proxy", Command: exe, Env: map[string]string{
			"ACP_TEST_ROLE": "proxy", "ACP_TEST_TRANSCRIPT": os.Getenv("ACP_TEST_INNER_TRANSCRIPT"), "GORACE": "atexit_sleep_ms=0"}}}
		if os.Getenv("ACP_TEST_INNER_EMPTY") != "" {
			proxies = nil
		}
		if err := Run(context.Background(), Config{Mode: ProxyMode, Proxies: proxies}, Stdin(), Stdout()); err != nil {
			fmt.Fprintln(os.Stderr, "inner conductor:", err)
			os.Exit(1)
		}
		return
	case "libproxy":
		// A proxy built on the proxy library, as the example proxies are:
		// a handler forwards each prompt, as context-injector's does, and
		// the rest passes through. Its transcript is not recorded.
		p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) { return r.Forward(ctx) },
		}}
		if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
			fmt.Fprintln(os.Stderr, "libproxy:", err)
			os.Exit(1)
		}
		return
	case "mute": // reads, never answers
		handle = func(*wire.Message) {}
	case "refuser": // answers every request with an error
		handle = func(m *wire.Message) {
			if m.IsRequest() {
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeInternalError, "refuser takes nothing")))
			}
		}
	case "crash":
		fmt.Fprintln(os.Stderr, "fake component crashing on purpose")
		os.Exit(7)
	default:
		panic("unknown role " + role)
	}
	if os.Getenv("ACP_TEST_STRAY") != "" {
		os.Stdout.WriteString("a stray print on stdout\n")
	}
	if os.Getenv("ACP_TEST_IGNORE_TERM") != "" {
		// From the start: a second signal may come as soon as the input ends.
		signal.Ignore(syscall.SIGTERM)
	}
	announce := os.Getenv("ACP_TEST_ANNOUNCE") != ""
	for {
		line, err := ch.Recv()
		if err != nil {
			if os.Getenv("ACP_TEST_IGNORE_EOF") != "" {
				time.Sleep(time.Hour) // as codex, claude and cursor agents do
			}
			return
		}
		if record != nil {
			record.Write(append(line, '\n'))
		}
		m, err := wire.Parse(line)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake: bad input:", err)
			continue
		}
		if announce {
			fmt.Fprintln(os.Stderr, "fake: received", m.Method) // for a test to wait on
		}
		handle(m)
	}
}

// lingerNotingTERM closes stdout and never returns; each SIGTERM it gets
// appends a line to path.
func lingerNotingTERM(path string) {
	terms := make(chan os.Signal, 4)
	signal.Notify(terms, syscall.SIGTERM)
	os.Stdout.Close()
	for range terms {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(f, "TERM")
		f.Close()
	}
}

// fakeProxy forwards everything, assigning its own ids per direction the
// way a careful proxy does.
func fakeProxy(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	next := int64(100)
	pending := map[string]json.RawMessage{} // our id -> their id
	ours := map[string]json.RawMessage{}    // their id -> our id, for cancels
	successor := wire.MethodSuccessor
	// A naive proxy (ACP_TEST_NAIVE_INIT) takes the line after an
	// initialize it passed on for that initialize's answer, and dies if
	// it is anything else.
	naive := os.Getenv("ACP_TEST_NAIVE_INIT") != ""
	awaitingInit := false
	return func(m *wire.Message) {
		if naive && awaitingInit && !m.IsResponse() {
			fmt.Fprintf(os.Stderr, "fake proxy: got %s before the answer to its initialize\n", m.Method)
			os.Exit(5)
		}
		awaitingInit = false
		if m.IsResponse() {
			orig, ok := pending[string(m.ID)]
			if !ok {
				fmt.Fprintln(os.Stderr, "fake proxy: unknown response id", string(m.ID))
				return
			}
			delete(pending, string(m.ID))
			send(&wire.Message{ID: orig, Result: m.Result, Error: m.Error})
			return
		}
		var id json.RawMessage
		if m.IsRequest() {
			next++
			id = wire.IntID(next)
			pending[string(id)] = m.ID
			ours[string(m.ID)] = id
		}
		// A cancel names the id this proxy was sent; the next hop knows the
		// request by the id this proxy gave it.
		translate := func(params json.RawMessage) json.RawMessage {
			var c struct{ RequestID json.RawMessage }
			json.Unmarshal(params, &c)
			if ourID, ok := ours[string(c.RequestID)]; ok {
				return json.RawMessage(`{"requestId":` + string(ourID) + `}`)
			}
			return params
		}
		if wire.IsSuccessor(m.Method) { // from the successor: to the predecessor, plain
			method, params, err := wire.Unwrap(m.Params)
			if err != nil {
				panic(err)
			}
			if method == wire.MethodCancelRequest {
				params = translate(params)
			}
			send(&wire.Message{ID: id, Method: method, Params: params})
			return
		}
		if m.Method == wire.MethodCancelRequest {
			m.Params = translate(m.Params)
		}
		if m.Method == "session/prompt" && os.Getenv("ACP_TEST_CRASH_ON_PROMPT") != "" && strings.Contains(string(m.Params), `"crash":true`) {
			fmt.Fprintln(os.Stderr, "fake proxy: crashing mid-prompt")
			os.Exit(9)
		}
		method := m.Method
		if method == wire.MethodProxyInitRust {
			successor = wire.MethodSuccessorRust
		}
		if wire.IsInitialize(method) {
			method = wire.MethodInitialize
			awaitingInit = m.IsRequest()
		}
		if os.Getenv("ACP_TEST_RUST_ONLY") != "" && m.Method == wire.MethodProxyInitialize {
			send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "method not found")))
			delete(pending, string(id))
			return
		}
		ch.Send(wire.AppendWrapped(nil, id, successor, method, m.Params))
	}
}

// fakeAgent answers initialize, session/new and session/prompt. A prompt
// streams an update, asks for permission, reads a file, streams another
// update and ends the turn.
func fakeAgent(send func(*wire.Message)) func(*wire.Message) {
	var prompt *wire.Message
	var session string
	next := int64(0)
	request := func(method, params string) {
		next++
		send(&wire.Message{ID: wire.IntID(next), Method: method, Params: json.RawMessage(params)})
	}
	update := func(text string) {
		send(&wire.Message{Method: "session/update", Params: json.RawMessage(
			`{"sessionId":` + strconv.Quote(session) + `,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + strconv.Quote(text) + `}}}`)})
	}
	sessions := 0
	// With ACP_TEST_MCP_TOOL set it speaks MCP-over-ACP too: after reading
	// the file it calls a tool of the acp server its session declared.
	mcpTool := os.Getenv("ACP_TEST_MCP_TOOL") != ""
	var server, conn string
	return func(m *wire.Message) {
		switch {
		case m.Method == "initialize" && mcpTool:
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)})
		case m.Method == "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"_meta":{"x.test/agent":true}}}`)})
		case m.Method == "session/new":
			var p struct{ MCPServers []struct{ Type, ID string } }
			json.Unmarshal(m.Params, &p)
			for _, s := range p.MCPServers {
				if s.Type == "acp" {
					server = s.ID
				}
			}
			sessions++
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(fmt.Sprintf(`{"sessionId":"sess-%d"}`, sessions))})
		case m.Method == "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
			}
			json.Unmarshal(m.Params, &p)
			prompt, session = m, p.SessionID
			update("thinking")
			request("session/request_permission", `{"sessionId":`+strconv.Quote(session)+`,"toolCall":{"toolCallId":"t1","title":"read notes"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}`)
		case m.IsResponse() && string(m.ID) == "1":
			request("fs/read_text_file", `{"sessionId":`+strconv.Quote(session)+`,"path":"/notes.txt"}`)
		case m.IsResponse() && string(m.ID) == "2" && mcpTool:
			update("read: " + string(m.Result))
			request("mcp/connect", `{"acpId":`+strconv.Quote(server)+`}`)
		case m.IsResponse() && string(m.ID) == "2":
			update("read: " + string(m.Result))
			send(&wire.Message{ID: prompt.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		case m.IsResponse() && string(m.ID) == "3":
			var r struct{ ConnectionID string }
			json.Unmarshal(m.Result, &r)
			conn = r.ConnectionID
			request("mcp/message", `{"connectionId":`+strconv.Quote(conn)+`,"method":"tools/call","params":{"name":"echo"}}`)
		case m.Method == "mcp/message" && m.IsRequest(): // the server asks us something
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"answer":"yes"}`)})
		case m.IsResponse() && string(m.ID) == "4":
			update("tool: " + string(m.Result))
			request("mcp/disconnect", `{"connectionId":`+strconv.Quote(conn)+`}`)
		case m.IsResponse() && string(m.ID) == "5":
			send(&wire.Message{ID: prompt.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		case m.IsRequest():
			send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "%s", m.Method)))
		}
	}
}

// streamedUpdate is the streamer's update i of the prompt tagged tag: its
// text is padded, where sizes is not 0, as updatePad says.
func streamedUpdate(session, tag string, i int, sizes uint64) *wire.Message {
	text := fmt.Sprintf("%s#%d", tag, i) + strings.Repeat(".", updatePad(sizes, i))
	return &wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
		`{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, session, text))}
}

// updatePad is how many bytes pad update i of a stream whose sizes are
// seeded with seed (0: none): mostly a few hundred at most, and one in
// twenty about as long as a read buffer (64 KiB), on either side of it.
func updatePad(seed uint64, i int) int {
	if seed == 0 {
		return 0
	}
	x := seed*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	if x%20 == 0 {
		return 60000 + int(x/20%12000)
	}
	return int(x / 20 % 300)
}

// fakeStreamer answers every prompt at once with the number of updates the
// prompt's _meta asks for, each naming the prompt's id and its index, then
// the response: the editor can check that none overtook another.
func fakeStreamer(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	sessions := 0
	// With ACP_TEST_STREAM_MCP naming an acp MCP server, the agent speaks
	// MCP-over-ACP itself and, at work forever, connects to that server
	// and streams MCP notifications on the connection too.
	mcpServer := os.Getenv("ACP_TEST_STREAM_MCP")
	return func(m *wire.Message) {
		if m.IsResponse() && string(m.ID) == `"stream-connect"` {
			conn := wire.Member(m.Result, "connectionId")
			go func() {
				for i := 0; ; i++ {
					send(&wire.Message{Method: "mcp/message", Params: json.RawMessage(fmt.Sprintf(
						`{"connectionId":%s,"method":"notifications/message","params":{"level":"info","data":%d}}`, conn, i))})
					time.Sleep(time.Millisecond)
				}
			}()
			return
		}
		switch m.Method {
		case "initialize":
			if mcpServer != "" {
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)})
				return
			}
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{}}`)})
		case "session/new":
			sessions++
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(fmt.Sprintf(`{"sessionId":"s%d"}`, sessions))})
		case "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
				Meta      struct {
					Tag     string `json:"tag"`
					Updates int    `json:"updates"`
					Pad     int    `json:"pad"`    // bytes of padding in the result
					IDLast  bool   `json:"idLast"` // answer with the id as the last member
					Sizes   uint64 `json:"sizes"`  // pads each update's text, as updatePad says
				} `json:"_meta"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				panic(err)
			}
			if os.Getenv("ACP_TEST_STREAM_FOREVER") != "" {
				// An agent at work that never ends its turn: it streams
				// until it is killed, whether its input ends or not.
				if mcpServer != "" {
					send(&wire.Message{ID: json.RawMessage(`"stream-connect"`), Method: "mcp/connect",
						Params: json.RawMessage(fmt.Sprintf(`{"acpId":%q}`, mcpServer))})
				}
				go func() {
					for i := 0; ; i++ {
						send(streamedUpdate(p.SessionID, "forever", i, 0))
						time.Sleep(time.Millisecond)
					}
				}()
				return
			}
			if path := os.Getenv("ACP_TEST_HOLD_PROMPT"); path != "" {
				// An agent at work until the test says: the FIFO opens once
				// the test opens it to write, and ends when it closes it.
				if f, err := os.Open(path); err == nil {
					io.Copy(io.Discard, f)
					f.Close()
				}
			}
			for i := range p.Meta.Updates {
				send(streamedUpdate(p.SessionID, p.Meta.Tag, i, p.Meta.Sizes))
			}
			result := json.RawMessage(fmt.Sprintf(`{"stopReason":"end_turn","_meta":{"tag":%q,"pad":%q}}`,
				p.Meta.Tag, strings.Repeat("x", p.Meta.Pad)))
			if p.Meta.IDLast {
				if err := ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","result":%s,"id":%s}`, result, m.ID)); err != nil {
					os.Exit(3)
				}
				return
			}
			send(&wire.Message{ID: m.ID, Result: result})
		}
	}
}

// fakeCanceller asks the client for permission and cancels that request at
// once; it answers a prompt only when the prompt is cancelled.
func fakeCanceller(send func(*wire.Message)) func(*wire.Message) {
	var prompt json.RawMessage
	return func(m *wire.Message) {
		switch m.Method {
		case "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1}`)})
		case "session/prompt":
			prompt = m.ID
			send(&wire.Message{ID: json.RawMessage(`"ask-1"`), Method: "session/request_permission", Params: json.RawMessage(`{"sessionId":"s"}`)})
			send(&wire.Message{Method: wire.MethodCancelRequest, Params: json.RawMessage(`{"requestId":"ask-1"}`)})
		case wire.MethodCancelRequest:
			var c struct{ RequestID json.RawMessage }
			json.Unmarshal(m.Params, &c)
			if string(c.RequestID) == string(prompt) {
				send(wire.ErrorResponse(prompt, wire.Errorf(codeCancelled, "cancelled")))
			}
		}
	}
}

// fakeMCPOwner is a proxy that declares an acp MCP server in every
// session/new it forwards and serves it: tools/call answers after asking the
// MCP client a question of its own (a server-to-client request).
func fakeMCPOwner(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	spelling := os.Getenv("ACP_TEST_MCP_SPELLING") // "id" or "serverId"
	forward := fakeProxy(ch, send)
	conns := 0
	var pendingCall *wire.Message
	return func(m *wire.Message) {
		if m.Method == "session/new" {
			m.Params, _ = wire.SetPath(m.Params, []string{"mcpServers"}, json.RawMessage(
				`[{"type":"acp","name":"owner-tools",`+strconv.Quote(spelling)+`:"srv-1","_meta":{"kept":true}}]`))
		}
		if !wire.IsSuccessor(m.Method) {
			if m.IsResponse() && string(m.ID) == "900" { // the MCP client answered our question
				send(&wire.Message{ID: pendingCall.ID, Result: json.RawMessage(`{"content":[{"type":"text","text":"tool ran; client said ` +
					strings.ReplaceAll(string(m.Result), `"`, `'`) + `"}]}`)})
				return
			}
			forward(m)
			return
		}
		method, params, _ := wire.Unwrap(m.Params)
		switch method {
		case "mcp/connect":
			conns++
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(fmt.Sprintf(`{"connectionId":"conn-%d","_meta":{"got":%s}}`, conns, params))})
		case "mcp/message":
			var p struct {
				ConnectionID string `json:"connectionId"`
				Method       string `json:"method"`
			}
			json.Unmarshal(params, &p)
			if p.Method == "tools/call" {
				if os.Getenv("ACP_TEST_MCP_CRASH") != "" {
					os.Exit(9)
				}
				if n, _ := strconv.Atoi(os.Getenv("ACP_TEST_MCP_FLOOD_OUT")); n > 0 {
					// More for the client than an outbox holds, then
					// the call's answer.
					pad := strings.Repeat("x", floodPad)
					for i := range n {
						ch.Send(wire.AppendWrapped(nil, nil, wire.MethodSuccessor, "mcp/message", fmt.Appendf(nil,
							`{"connectionId":%q,"method":"notifications/progress","params":{"seq":%d,"pad":%q}}`, p.ConnectionID, i, pad)))
					}
					send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"content":[]}`)})
					return
				}
				if fifo := os.Getenv("ACP_TEST_MCP_STALL"); fifo != "" {
					// Reads nothing more until the test says so.
					os.ReadFile(fifo)
					send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"content":[]}`)})
					return
				}
				pendingCall = m
				ch.Send(wire.AppendWrapped(nil, json.RawMessage("900"), wire.MethodSuccessor, "mcp/message",
					json.RawMessage(`{"connectionId":"`+p.ConnectionID+`","method":"sampling/createMessage","params":{"q":"ok?"}}`)))
				return
			}
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"tools":[{"name":"echo"}]}`)})
		case "mcp/disconnect":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{}`)})
		default:
			forward(m)
		}
	}
}

// fakeMCPAgent speaks MCP-over-ACP natively. On a prompt it connects to the
// first acp server of its session, calls a tool, answers the server's own
// question, tries a bogus connection, disconnects, and reports each answer in
// a session/update before ending the turn.
func fakeMCPAgent(send func(*wire.Message)) func(*wire.Message) {
	var server, spelling, conn string
	var prompt json.RawMessage
	report := func(label string, v json.RawMessage) {
		send(&wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
			`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, label+" "+string(v)))})
	}
	request := func(id, method, params string) {
		send(&wire.Message{ID: json.RawMessage(id), Method: method, Params: json.RawMessage(params)})
	}
	return func(m *wire.Message) {
		switch {
		case m.Method == "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)})
		case m.Method == "session/new":
			var p struct{ MCPServers []map[string]any }
			json.Unmarshal(m.Params, &p)
			for _, s := range p.MCPServers {
				if s["type"] == "acp" {
					if id, ok := s["id"].(string); ok {
						server, spelling = id, "acpId"
					} else {
						server, spelling = s["serverId"].(string), "serverId"
					}
				}
			}
			report("declared", json.RawMessage(mustJSON(p.MCPServers)))
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"sessionId":"s1"}`)})
		case m.Method == "session/prompt":
			prompt = m.ID
			request(`"c1"`, "mcp/connect", `{"`+spelling+`":"`+server+`"}`)
		case string(m.ID) == `"c1"`:
			report("connect", m.Result)
			var r struct{ ConnectionID string }
			json.Unmarshal(m.Result, &r)
			conn = r.ConnectionID
			request(`"c2"`, "mcp/message", `{"connectionId":"`+conn+`","method":"tools/call","params":{"name":"echo"}}`)
		case m.Method == "mcp/message" && m.IsRequest(): // the server asks us something
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"answer":"yes"}`)})
		case string(m.ID) == `"c2"` && m.Error != nil: // the server went away: is its connection gone?
			report("call-failed", m.Error)
			request(`"c5"`, "mcp/message", `{"connectionId":"`+conn+`","method":"tools/list"}`)
		case string(m.ID) == `"c5"`:
			report("after", m.Error)
			send(&wire.Message{ID: prompt, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		case string(m.ID) == `"c2"`:
			report("call", m.Result)
			request(`"c3"`, "mcp/message", `{"connectionId":"no-such-conn","method":"tools/list"}`)
		case string(m.ID) == `"c3"`:
			report("bogus", m.Error)
			request(`"c4"`, "mcp/disconnect", `{"connectionId":"`+conn+`"}`)
		case string(m.ID) == `"c4"`:
			report("disconnect", m.Result)
			send(&wire.Message{ID: prompt, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		}
	}
}

// floodPad is the size of each message of the MCP flood tests.
const floodPad = 256 << 10

// fakeStdioMCPAgent has no MCP-over-ACP: it launches the stdio MCP server it
// is given in session/new, as any agent would, and on a prompt speaks MCP to
// it (initialize, a tool call during which the server asks it a question),
// reporting each answer in a session/update.
func fakeStdioMCPAgent(send func(*wire.Message)) func(*wire.Message) {
	var server struct {
		Name, Command string
		Args          []string
		Env           []struct{ Name, Value string }
	}
	report := func(label string, v []byte) {
		send(&wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
			`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, label+" "+string(v)))})
	}
	return func(m *wire.Message) {
		switch m.Method {
		case "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{}}`)})
		case "session/new":
			var p struct{ MCPServers []json.RawMessage }
			json.Unmarshal(m.Params, &p)
			for _, raw := range p.MCPServers {
				report("declared", raw)
				json.Unmarshal(raw, &server)
			}
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"sessionId":"s1"}`)})
		case "session/prompt":
			cmd := exec.Command(server.Command, server.Args...)
			cmd.Env = os.Environ()
			for _, e := range server.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				report("start-failed", []byte(err.Error()))
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"stopReason":"refusal"}`)})
				return
			}
			mcp := wire.NewLineChannel(out, in, 0)
			next := func() *wire.Message {
				line, err := mcp.Recv()
				if err != nil {
					report("mcp-eof", []byte(err.Error()))
					return &wire.Message{}
				}
				msg, _ := wire.Parse(line)
				return msg
			}
			mcp.Send([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			report("list", next().Result)
			mcp.Send([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`))
			if os.Getenv("ACP_TEST_MCP_CRASH") != "" {
				// The server goes away during the call: an MCP error for
				// it, then the end of the shim's output, with nothing
				// asked of the client in between.
				report("call-failed", next().Error)
				eof := make(chan error, 1)
				go func() { _, err := mcp.Recv(); eof <- err }()
				select {
				case err := <-eof:
					report("after", []byte(fmt.Sprint(err)))
				case <-time.After(10 * time.Second):
					report("after", []byte("still open after 10s"))
				}
				in.Close()
				report("shim-exit", []byte(fmt.Sprint(cmd.Wait())))
				// A new connection to the server that went away, with
				// its declaration's token: refused, and the shim ends.
				again := exec.Command(server.Command, server.Args...)
				again.Env = cmd.Env
				in2, _ := again.StdinPipe()
				out2, _ := again.StdoutPipe()
				var stderr bytes.Buffer
				again.Stderr = &stderr
				if err := again.Start(); err != nil {
					report("reconnect", []byte(err.Error()))
				} else {
					mcp2 := wire.NewLineChannel(out2, in2, 0)
					mcp2.Send([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`))
					answer := make(chan []byte, 1)
					go func() {
						line, err := mcp2.Recv()
						if err != nil {
							line = []byte(err.Error())
						}
						answer <- line
					}()
					select {
					case line := <-answer:
						report("reconnect", line)
					case <-time.After(10 * time.Second):
						report("reconnect", []byte("no answer after 10s"))
						again.Process.Kill()
					}
					in2.Close()
					exit := again.Wait()
					report("reconnect-stderr", bytes.TrimSpace(stderr.Bytes()))
					report("reconnect-exit", []byte(fmt.Sprint(exit)))
				}
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
				return
			}
			if n, _ := strconv.Atoi(os.Getenv("ACP_TEST_MCP_FLOOD_OUT")); n > 0 {
				// Reads nothing until the test says so, then checks that
				// every notification came, in order, before the answer.
				os.ReadFile(os.Getenv("ACP_TEST_MCP_STALL"))
				got := 0
				for {
					msg := next()
					if msg.Method != "notifications/progress" {
						report("flood-out", fmt.Appendf(nil, "%d in order, then %s", got, msg.Result))
						break
					}
					if !bytes.Contains(msg.Params, fmt.Appendf(nil, `"seq":%d,`, got)) {
						report("flood-out", fmt.Appendf(nil, "notification %d out of order: %.40s", got, msg.Params))
						break
					}
					got++
				}
				in.Close()
				report("shim-exit", []byte(fmt.Sprint(cmd.Wait())))
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
				return
			}
			if n, _ := strconv.Atoi(os.Getenv("ACP_TEST_MCP_FLOOD_IN")); n > 0 {
				// A call the server sits on, and behind it more requests
				// than an outbox holds; then every answer, in order.
				pad := strings.Repeat("x", floodPad)
				go func() {
					for i := range n {
						mcp.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"pad":%q}}`, 100+i, pad))
					}
				}()
				got, want := 0, "2"
				for {
					msg := next()
					if string(msg.ID) != want {
						report("flood-in", fmt.Appendf(nil, "%d in order, then id %s", got, msg.ID))
						break
					}
					if got++; got == n+1 {
						report("flood-in", fmt.Appendf(nil, "%d in order", got))
						break
					}
					want = strconv.Itoa(100 + got - 1)
				}
				in.Close()
				report("shim-exit", []byte(fmt.Sprint(cmd.Wait())))
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
				return
			}
			ask := next() // the server's own question, before its answer
			report("asked", []byte(ask.Method))
			mcp.Send((&wire.Message{ID: ask.ID, Result: json.RawMessage(`{"answer":"yes"}`)}).Bytes())
			report("call", next().Result)
			in.Close() // the MCP client goes away: the bridge disconnects
			report("shim-exit", []byte(fmt.Sprint(cmd.Wait())))
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		}
	}
}

// fakeManyMCPAgent speaks MCP-over-ACP natively and, on a prompt, opens two
// connections to every acp server of its session at once, then lists the
// tools on all of them at once, then disconnects them all, and reports which
// server answered on which connection.
func fakeManyMCPAgent(send func(*wire.Message)) func(*wire.Message) {
	var servers []string
	var prompt json.RawMessage
	serverOf := map[string]string{} // connectionId -> server
	answers := map[string]string{}  // connectionId -> tools/list result
	pending := 0
	request := func(id, method, params string) {
		pending++
		send(&wire.Message{ID: json.RawMessage(strconv.Quote(id)), Method: method, Params: json.RawMessage(params)})
	}
	return func(m *wire.Message) {
		switch {
		case m.Method == "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)})
		case m.Method == "session/new" || m.Method == "session/load":
			var p struct{ MCPServers []struct{ Type, ID string } }
			json.Unmarshal(m.Params, &p)
			for _, s := range p.MCPServers {
				if s.Type == "acp" {
					servers = append(servers, s.ID)
				}
			}
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"sessionId":"s1"}`)})
		case m.Method == "session/prompt":
			prompt = m.ID
			for _, s := range servers {
				for k := range 2 {
					request(fmt.Sprintf("c|%s|%d", s, k), "mcp/connect", `{"acpId":`+strconv.Quote(s)+`}`)
				}
			}
		case m.IsResponse():
			pending--
			var id string
			json.Unmarshal(m.ID, &id)
			kind, rest, _ := strings.Cut(id, "|")
			switch kind {
			case "c":
				var r struct{ ConnectionID string }
				json.Unmarshal(m.Result, &r)
				server, _, _ := strings.Cut(rest, "|")
				serverOf[r.ConnectionID] = server
				if pending == 0 {
					for c := range serverOf {
						request("l|"+c, "mcp/message", `{"connectionId":`+strconv.Quote(c)+`,"method":"tools/list"}`)
					}
				}
			case "l":
				answers[rest] = string(m.Result)
				if pending == 0 {
					for c := range serverOf {
						request("d|"+c, "mcp/disconnect", `{"connectionId":`+strconv.Quote(c)+`}`)
					}
				}
			case "d":
				if pending == 0 {
					report := map[string]string{}
					for c, s := range serverOf {
						report[c] = s + " " + answers[c]
					}
					send(&wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
						`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, mustJSON(report)))})
					send(&wire.Message{ID: prompt, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
				}
			}
		}
	}
}

// fakeThinkwellProxy is a proxy of the dialect @thinkwell/conductor and
// sacp-conductor speak, written from their code rather than from the
// conductor's table: it refuses proxy/initialize and _proxy/initialize,
// takes initialize only when marked _meta.proxy (and says so in its
// answer), and exchanges everything with its successor in
// _proxy/successor/request and _proxy/successor/notification. Any other
// envelope is a protocol error it reports on stderr and refuses.
//
// With ACP_TEST_TW_MCP set ("thinkwell" or "sacp") it also serves an MCP
// server, declared as that dialect does, {"type":"http","url":"acp:<uuid>"},
// over _mcp/*: _mcp/connect as @thinkwell/conductor's proxies read it
// ({connectionId, url}, answered with that connectionId) or as sacp's do
// ({acp_url}, answered {connection_id}); tools/call asks the MCP client a
// question of its own before it answers; _mcp/disconnect must come as a
// notification.
func fakeThinkwellProxy(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	const (
		request      = "_proxy/successor/request"
		notification = "_proxy/successor/notification"
		url          = "acp:6f1c2a9e-0d7b-4c55-9a43-2b8e5d1f7a60"
	)
	flavor := os.Getenv("ACP_TEST_TW_MCP")
	conns := map[string]bool{}
	var pendingCall *wire.Message // a tools/call waiting for the client's answer (id 900)
	mcp := func(m *wire.Message, method string, params json.RawMessage) {
		var p struct {
			ConnectionID  string `json:"connectionId"`
			ConnectionID2 string `json:"connection_id"`
			URL           string `json:"url"`
			ACPURL        string `json:"acp_url"`
			Method        string `json:"method"`
		}
		json.Unmarshal(params, &p)
		switch method {
		case "_mcp/connect":
			target, id := p.URL, p.ConnectionID
			if flavor == "sacp" {
				target, id = p.ACPURL, fmt.Sprintf("tw-conn-%d", len(conns)+1)
			}
			if target != url || id == "" {
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeInvalidParams, "no MCP server at %q", target)))
				return
			}
			conns[id] = true
			if flavor == "sacp" {
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"connection_id":` + strconv.Quote(id) + `}`)})
			} else {
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"connectionId":` + strconv.Quote(id) + `,"serverInfo":{"name":"tw-tools","version":"0.1.0"},"capabilities":{"tools":{}}}`)})
			}
		case "_mcp/message":
			switch {
			case !conns[p.ConnectionID]:
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeInvalidParams, "Unknown connection: %s", p.ConnectionID)))
			case p.Method == "tools/call":
				pendingCall = m
				ch.Send(wire.AppendWrapped(nil, json.RawMessage("900"), request, "_mcp/message",
					json.RawMessage(`{"connectionId":`+strconv.Quote(p.ConnectionID)+`,"method":"sampling/createMessage","params":{"q":"ok?"}}`)))
			case p.Method == "initialize":
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"tw-tools","version":"0.1.0"}}`)})
			case m.IsRequest():
				send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"tools":[{"name":"echo"}]}`)})
			}
		case "_mcp/disconnect":
			if m.IsRequest() {
				fmt.Fprintln(os.Stderr, "thinkwell proxy: _mcp/disconnect as a request")
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "method not found: _mcp/disconnect")))
				return
			}
			id := p.ConnectionID
			if flavor == "sacp" {
				id = p.ConnectionID2
			}
			delete(conns, id)
		default:
			fmt.Fprintln(os.Stderr, "thinkwell proxy: MCP method of another dialect:", method)
			if m.IsRequest() {
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "method not found: %s", method)))
			}
		}
	}
	next := int64(500)
	pending := map[string]*wire.Message{} // our id -> the request it serves
	wrap := func(id json.RawMessage, envelope, method string, params json.RawMessage) {
		inner := map[string]json.RawMessage{"method": json.RawMessage(strconv.Quote(method))}
		if params != nil {
			inner["params"] = params
		}
		b, _ := json.Marshal(inner)
		send(&wire.Message{ID: id, Method: envelope, Params: b})
	}
	ours := func(m *wire.Message) json.RawMessage {
		if !m.IsRequest() {
			return nil
		}
		next++
		id := wire.IntID(next)
		pending[string(id)] = m
		return id
	}
	return func(m *wire.Message) {
		switch {
		case flavor != "" && m.IsResponse() && string(m.ID) == "900": // the MCP client answered our question
			send(&wire.Message{ID: pendingCall.ID, Result: json.RawMessage(`{"content":[{"type":"text","text":"tool ran; client said ` +
				strings.ReplaceAll(string(m.Result), `"`, `'`) + `"}]}`)})
		case flavor != "" && m.Method == "session/new":
			params, _ := wire.SetPath(m.Params, []string{"mcpServers"}, json.RawMessage(`[{"type":"http","name":"tw-tools","url":"`+url+`","headers":[]}]`))
			wrap(ours(m), request, m.Method, params)
		case m.IsResponse():
			orig, ok := pending[string(m.ID)]
			if !ok {
				fmt.Fprintln(os.Stderr, "thinkwell proxy: unknown response id", string(m.ID))
				return
			}
			delete(pending, string(m.ID))
			result := m.Result
			if orig.Method == "initialize" && m.Error == nil {
				var r map[string]any
				json.Unmarshal(result, &r)
				meta, _ := r["_meta"].(map[string]any)
				if meta == nil {
					meta = map[string]any{}
				}
				meta["proxy"] = true
				r["_meta"] = meta
				result, _ = json.Marshal(r)
			}
			send(&wire.Message{ID: orig.ID, Result: result, Error: m.Error})
		case m.Method == "proxy/initialize" || m.Method == "_proxy/initialize":
			send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "method not found: %s", m.Method)))
		case m.Method == "initialize":
			var p map[string]any
			json.Unmarshal(m.Params, &p)
			meta, _ := p["_meta"].(map[string]any)
			if meta["proxy"] != true {
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeInvalidParams, "this command requires the proxy capability")))
				return
			}
			delete(meta, "proxy") // as sacp does: the successor is told by the conductor
			delete(meta, "symposium")
			params, _ := json.Marshal(p)
			wrap(ours(m), request, "initialize", params)
		case m.Method == request || m.Method == notification: // from the successor
			var inner struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			json.Unmarshal(m.Params, &inner)
			if (m.Method == request) != m.IsRequest() {
				fmt.Fprintln(os.Stderr, "thinkwell proxy:", m.Method, "with the wrong kind of message")
			}
			if flavor != "" && (strings.HasPrefix(inner.Method, "_mcp/") || strings.HasPrefix(inner.Method, "mcp/")) {
				mcp(m, inner.Method, inner.Params)
				return
			}
			send(&wire.Message{ID: ours(m), Method: inner.Method, Params: inner.Params})
		case strings.Contains(m.Method, "proxy/successor"):
			fmt.Fprintln(os.Stderr, "thinkwell proxy: an envelope of another dialect:", m.Method)
			if m.IsRequest() {
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "method not found: %s", m.Method)))
			}
		case m.IsRequest(): // from the predecessor
			wrap(ours(m), request, m.Method, m.Params)
		default:
			wrap(nil, notification, m.Method, m.Params)
		}
	}
}

// fakeSpoofer is a proxy that forwards like fakeProxy but, when a prompt
// arrives, first tries to speak for the agent with an envelope nested in an
// envelope (id 9999), and to initialize the editor with proxy/initialize
// (id 9998). It swallows the answers, which its transcript records.
func fakeSpoofer(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	inner := fakeProxy(ch, send)
	return func(m *wire.Message) {
		switch {
		case m.IsResponse() && (string(m.ID) == "9999" || string(m.ID) == "9998"):
			return
		case m.Method == "session/prompt":
			ch.Send([]byte(`{"jsonrpc":"2.0","id":9999,"method":"proxy/successor","params":{"method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"spoof"},"options":[]}}}}`))
			ch.Send([]byte(`{"jsonrpc":"2.0","id":9998,"method":"proxy/initialize","params":{"protocolVersion":1}}`))
		}
		inner(m)
	}
}

// fakeRequestOwner is a proxy that declares an acp MCP server and serves it
// over the request binding, as the TypeScript SDK's McpOverAcpProvider
// does: mcp/connect is an unknown method, an mcp/message without serverId
// and requestId unavailable; tools/call sends a progress
// notification for its request, then answers with the {result} carrier.
func fakeRequestOwner(ch *wire.LineChannel, send func(*wire.Message)) func(*wire.Message) {
	forward := fakeProxy(ch, send)
	return func(m *wire.Message) {
		if m.Method == "session/new" {
			m.Params, _ = wire.SetPath(m.Params, []string{"mcpServers"}, json.RawMessage(`[{"type":"acp","name":"req-tools","serverId":"srv-r"}]`))
		}
		if !wire.IsSuccessor(m.Method) {
			forward(m)
			return
		}
		method, params, _ := wire.Unwrap(m.Params)
		switch method {
		case "mcp/connect":
			send(wire.ErrorResponse(m.ID, wire.Errorf(codeMethodNotFound, "Method not found: mcp/connect")))
		case "mcp/message":
			var p struct {
				ServerID  json.RawMessage `json:"serverId"`
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(params, &p)
			if p.ServerID == nil || p.RequestID == nil {
				// As the SDK's provider refuses a connect-binding message.
				send(wire.ErrorResponse(m.ID, wire.Errorf(codeMCPServerUnavailable, "MCP server registration unavailable")))
				return
			}
			send(&wire.Message{Method: "mcp/message", Params: json.RawMessage(`{"serverId":` + string(p.ServerID) + `,"requestId":` +
				string(p.RequestID) + `,"method":"notifications/progress","params":{"progressToken":"t1","progress":1}}`)})
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"result":{"content":[{"type":"text","text":"echoed"}]}}`)})
		default:
			forward(m)
		}
	}
}

// fakeRequestAgent calls the first acp server of its session over the
// request binding, as the TypeScript SDK's McpOverAcpCaller does, and
// reports the progress and the outcome before ending the turn.
func fakeRequestAgent(send func(*wire.Message)) func(*wire.Message) {
	var server string
	var prompt json.RawMessage
	report := func(label string, v json.RawMessage) {
		send(&wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
			`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}`, label+" "+string(v)))})
	}
	return func(m *wire.Message) {
		switch {
		case m.Method == "initialize":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)})
		case m.Method == "session/new":
			var p struct{ MCPServers []struct{ ServerID string } }
			json.Unmarshal(m.Params, &p)
			if len(p.MCPServers) > 0 {
				server = p.MCPServers[0].ServerID
			}
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{"sessionId":"s1"}`)})
		case m.Method == "session/prompt":
			prompt = m.ID
			send(&wire.Message{ID: json.RawMessage(`"m1"`), Method: "mcp/message", Params: json.RawMessage(`{"serverId":` + strconv.Quote(server) +
				`,"requestId":"r1","method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"t1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)})
		case m.Method == "session/close":
			send(&wire.Message{ID: m.ID, Result: json.RawMessage(`{}`)})
		case m.Method == "mcp/message" && m.IsNotification():
			report("progress", m.Params)
		case string(m.ID) == `"m1"`:
			report("call", append(m.Result, m.Error...))
			send(&wire.Message{ID: prompt, Result: json.RawMessage(`{"stopReason":"end_turn"}`)})
		}
	}
}
