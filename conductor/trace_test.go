package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/browser"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/trace"
)

// TestGoldenTrace records the golden chain (editor -> 2 proxies -> agent)
// through a whole turn: initialize, session/new, a prompt with updates, a
// permission request, a file read and an MCP tool call whose server (the
// first proxy) asks the agent a question. The trace, at each detail level,
// is compared with testdata/golden/trace-*.jsons, times set to 0.
func TestGoldenTrace(t *testing.T) {
	for _, detail := range trace.Details {
		t.Run(string(detail), func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			rec := trace.NewRecorder(&out, trace.Options{Detail: detail})
			e := startChain(t, Config{
				Proxies: []Component{fake(t, dir, "proxy-a", "mcp-owner", "ACP_TEST_MCP_SPELLING=id"), fake(t, dir, "proxy-b", "proxy")},
				Agent:   fake(t, dir, "agent", "agent", "ACP_TEST_MCP_TOOL=1"),
				Trace:   rec,
			})
			goldenTurn(t, e)
			if err := e.close(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			got := zeroTimes(t, out.String())
			checkGoldenTrace(t, "trace-"+string(detail)+".jsons", got)
			if detail == trace.Metadata {
				for _, secret := range []string{"remember the milk", "hello", "/notes.txt", `"name":"echo"`} {
					if strings.Contains(got, secret) {
						t.Errorf("a metadata trace holds %q", secret)
					}
				}
			}
		})
	}
}

// goldenTurn drives the turn of TestGoldenTrace from the editor's side.
func goldenTurn(t *testing.T, e *editor) {
	t.Helper()
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hello"}]}}`)
	e.recv() // update: thinking
	perm := e.recvMsg()
	if perm.Method != "session/request_permission" {
		t.Fatalf("want a permission request, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(perm.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	read := e.recvMsg()
	if read.Method != "fs/read_text_file" {
		t.Fatalf("want fs/read_text_file, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"result":{"content":"remember the milk"}}`)
	e.recv() // update: read
	if tool := e.recvMsg(); !strings.Contains(updateText(tool), "tool ran") {
		t.Fatalf("want the tool's answer, got %s", e.seen[len(e.seen)-1])
	}
	if m := e.recvMsg(); !m.IsResponse() || string(m.ID) != "2" {
		t.Fatalf("want the prompt's answer, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`)
}

var tsField = regexp.MustCompile(`"ts":[-+0-9.eE]+`)

// zeroTimes checks that every line of a trace is a JSON object with a time,
// and sets the times to 0.
func zeroTimes(t *testing.T, s string) string {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var e trace.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || !tsField.MatchString(line) {
			t.Fatalf("not a trace event: %s (%v)", line, err)
		}
	}
	return tsField.ReplaceAllString(s, `"ts":0`)
}

// checkGoldenTrace compares a trace with a golden one. The components run
// concurrently, so only what the relay promises is compared: the same
// events, and the same order between each two components in each
// direction.
func checkGoldenTrace(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	g, w := byHop(t, got), byHop(t, string(want))
	same := len(g) == len(w)
	for hop, lines := range w {
		same = same && strings.Join(g[hop], "\n") == strings.Join(lines, "\n")
	}
	if !same {
		t.Errorf("%s: got\n%s\nwant (in any order that keeps each hop's):\n%s", name, got, want)
	}
}

// byHop groups the lines of a trace by their from and to, in order.
func byHop(t *testing.T, s string) map[[2]string][]string {
	t.Helper()
	hops := map[[2]string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var e trace.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a trace event: %s (%v)", line, err)
		}
		hop := [2]string{e.From, e.To}
		hops[hop] = append(hops[hop], line)
	}
	return hops
}

// A tracedChain is a chain whose trace is written to out.
type tracedChain struct {
	*editor
	rec *trace.Recorder
	out bytes.Buffer
}

// startTraced starts the chain cfg describes, traced at detail.
func startTraced(t *testing.T, cfg Config, detail trace.Detail) *tracedChain {
	t.Helper()
	c := new(tracedChain)
	c.rec = trace.NewRecorder(&c.out, trace.Options{Detail: detail})
	cfg.Trace = c.rec
	c.editor = startChain(t, cfg)
	return c
}

// end stops the chain and its recorder and returns the trace, checked to
// answer every request once (answeredOnce).
func (c *tracedChain) end(t *testing.T) []trace.Event {
	t.Helper()
	c.close()
	c.rec.Close()
	events := readTrace(t, c.out.String())
	answeredOnce(t, events)
	return events
}

// readTrace parses a trace, failing on any line that is not an event.
func readTrace(t *testing.T, s string) []trace.Event {
	t.Helper()
	var events []trace.Event
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var e trace.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a trace event: %s (%v)", line, err)
		}
		events = append(events, e)
	}
	return events
}

// answeredOnce checks that every request in a trace has exactly one
// response, from the one asked to the one asking, under its id; or to the
// conductor, which took the answer to a request it sent for another; or
// from the conductor, which failed a request its receiver never answered,
// to its sender, or to itself if it took that failure.
func answeredOnce(t *testing.T, events []trace.Event) {
	t.Helper()
	type key struct{ from, to, id string }
	open := map[key]int{}
	method := map[key]string{}
	for _, e := range events {
		switch e.Type {
		case trace.TypeRequest:
			k := key{e.From, e.To, string(e.ID)}
			open[k]++
			method[k] = e.Method
		case trace.TypeResponse:
			k := key{e.To, e.From, string(e.ID)}
			if open[k] == 0 && (e.To == "conductor" || e.From == "conductor") {
				for o := range open {
					if o.id != string(e.ID) || method[o] != e.Method {
						continue
					}
					if e.To == "conductor" && o.to == e.From ||
						e.From == "conductor" && (o.from == e.To || e.To == "conductor") {
						k = o
					}
				}
			}
			if open[k] != 1 {
				t.Errorf("response %s -> %s #%s (%s) answers no open request", e.From, e.To, e.ID, e.Method)
			}
			delete(open, k)
		}
	}
	for k := range open {
		t.Errorf("request %s -> %s #%s was never answered in the trace", k.from, k.to, k.id)
	}
}

// TestTraceRestart traces a chain whose middle proxy crashes on a prompt
// and is restarted: the trace shows the prompt sent to the crashed proxy
// failed by the conductor (the proxy never answered it), the conductor
// replaying its initialization, and the next prompt
// going through the new process; every request in it is answered once.
func TestTraceRestart(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")
	crasher.OnFailure = PolicyRestart
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "first", "proxy"), crasher},
		Agent:   fake(t, dir, "agent", "streamer"),
		Trace:   rec,
	})
	e.send(initLine)
	e.recvMsg()
	for i, crash := range []bool{false, true, false} {
		e.send(promptLine(100+i, crash))
		for {
			m := e.recvMsg()
			if m.IsResponse() {
				if (m.Error != nil) != crash {
					t.Fatalf("prompt %d: got %s", i, e.seen[len(e.seen)-1])
				}
				break
			}
		}
	}
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec.Close()
	events := readTrace(t, out.String())
	answeredOnce(t, events)
	var failed, replayed, reanswered, after bool
	for _, ev := range events {
		switch {
		case ev.Type == trace.TypeResponse && ev.From == "conductor" && ev.To == "first" && ev.Method == "session/prompt" && *ev.IsError:
			failed = true
			if !strings.Contains(string(ev.Payload), "crasher") {
				t.Errorf("the failed prompt's error does not name the proxy: %s", ev.Payload)
			}
		case ev.Type == trace.TypeRequest && ev.From == "conductor" && ev.To == "crasher" && ev.Method == wire.MethodProxyInitialize:
			replayed = true
		case replayed && ev.Type == trace.TypeResponse && ev.From == "crasher" && ev.To == "conductor" && !*ev.IsError:
			reanswered = true
		case failed && replayed && ev.Type == trace.TypeResponse && ev.From == "crasher" && ev.Method == "session/prompt" && !*ev.IsError:
			after = true // the next prompt, through the new process
		}
	}
	if !failed || !replayed || !reanswered || !after {
		t.Errorf("trace: prompt to the crashed proxy failed by the conductor %v, initialize replayed %v and answered %v, next prompt through %v:\n%s",
			failed, replayed, reanswered, after, &out)
	}
}

// TestTraceRestartMidCall traces a proxy that crashes while a request it
// forwarded is at the agent, and is restarted: the agent's late answer,
// which nobody may take now, still ends the request in the trace. Left
// open, each such request stayed in the trace's table of requests awaiting
// their answer for as long as the trace ran (under serve, for weeks).
func TestTraceRestartMidCall(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")
	crasher.OnFailure = PolicyRestart
	agent, started := scriptedComponent(t, dir, "agent")
	e := startChain(t, Config{Proxies: []Component{crasher}, Agent: agent, Trace: rec, GracePeriod: 100 * time.Millisecond})
	ag := started()
	e.send(initLine)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	e.recvMsg()
	e.send(promptLine(1, false))
	held := ag.recvMsg() // the agent works on it
	e.send(promptLine(2, true))
	for range 2 {
		if m := e.recvMsg(); m.Error == nil {
			t.Fatalf("a prompt through the crashed proxy: %s", e.seen[len(e.seen)-1])
		}
	}
	if m := ag.recvMsg(); m.Method != wire.MethodCancelRequest || string(requestID(m.Params)) != string(held.ID) {
		t.Fatalf("the agent got %s, want the cancel of the orphaned prompt", m.Raw)
	}
	ag.reply(held, `{"stopReason":"cancelled"}`)
	e.close()
	rec.Close()
	answeredOnce(t, readTrace(t, out.String()))
}

// TestTraceConcurrentSessions traces prompts in many sessions at once.
// Each session's events, as the viewer's session filter selects them, are
// exactly that session's messages, each hop in the order sent; and a
// browser's rendering of the trace filtered to one session draws exactly
// those arrows.
func TestTraceConcurrentSessions(t *testing.T) {
	const sessions, prompts, updates = 6, 4, 3
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p1", "proxy"), fake(t, dir, "p2", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer"),
		Trace:   rec,
	})
	e.send(initLine)
	e.recvMsg()
	for i := range sessions {
		e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new-%d","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, i))
		e.recvMsg()
	}
	go func() {
		for p := range prompts {
			for s := range sessions {
				e.ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"%d-%d","method":"session/prompt","params":{"sessionId":"s%d","prompt":[],"_meta":{"tag":"s%d-p%d","updates":%d}}}`,
					s, p, s+1, s+1, p, updates))
			}
		}
	}()
	awaitResponses(e, sessions*prompts)
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec.Close()
	events := readTrace(t, out.String())
	answeredOnce(t, events)

	// Per session: session/new's answer on 3 hops, then per prompt 3
	// requests, 3 x updates notifications and 3 responses.
	want := 3 + prompts*(3+3*updates+3)
	for s := 1; s <= sessions; s++ {
		id := fmt.Sprintf("s%d", s)
		var mine []trace.Event
		for _, ev := range events {
			if ev.Session == id {
				mine = append(mine, ev)
			}
		}
		if len(mine) != want {
			t.Errorf("session %s: %d events, want %d", id, len(mine), want)
		}
		// Each hop carries this session's updates in the order sent.
		next := map[[2]string]int{}
		for _, ev := range mine {
			if ev.Method != "session/update" {
				continue
			}
			hop := [2]string{ev.From, ev.To}
			var u struct {
				Update struct{ Content struct{ Text string } }
			}
			json.Unmarshal(ev.Params, &u)
			n := next[hop]
			if wantText := fmt.Sprintf("%s-p%d#%d", id, n/updates, n%updates); u.Update.Content.Text != wantText {
				t.Errorf("session %s, %s -> %s: update %q, want %q", id, ev.From, ev.To, u.Update.Content.Text, wantText)
			}
			next[hop]++
		}
	}

	if _, err := browser.Find(); err != nil {
		t.Skipf("no browser for the rendering half: %v", err)
	}
	lines, err := trace.ReadEvents(&out)
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "trace.html")
	var html bytes.Buffer
	if err := trace.View(&html, lines, trace.ViewOptions{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(page, html.Bytes(), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := browser.DumpDOM(ctx, "file://"+page+"#session=s3", 1400, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if arrows := strings.Count(dom, `class="arrow `); arrows != want {
		t.Errorf("filtered to session s3, the viewer drew %d arrows, want %d", arrows, want)
	}
	if !strings.Contains(dom, fmt.Sprintf(`data-shown="%d" data-total="%d" data-lanes="4"`, want, len(events))) {
		t.Errorf("the viewer's status is not %d of %d events in 4 lanes", want, len(events))
	}
}

// TestTraceBridgedConnections traces two stdio-bridged connections to one
// server, open at once, each with requests in flight both ways under the
// same ids: the owner's sampling/createMessage on one and roots/list on
// the other (each connection numbers its requests from 1), and each
// client's tools/call, both 7. Every response pairs in the trace with its
// own request, and the connections are told apart: the first is
// mcp:tools, as a single connection always was, the second mcp:tools#2.
func TestTraceBridgedConnections(t *testing.T) {
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	ed, _, declared := mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, Trace: rec})
	var clients []*mcpUser
	for _, cid := range []string{"c1", "c2"} {
		c := &mcpUser{s: startShim(t, declared)}
		c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"roots":{}},"clientInfo":{"name":"client","version":"1"}}`)
		connect := ed.recvMsg()
		if connect.Method != methodMCPConnect {
			t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
		}
		ed.reply(connect, `{"connectionId":"`+cid+`"}`)
		ed.reply(ed.recvMsg(), `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
		if _, _, result := c.recvResult(t); result == nil {
			t.Fatalf("client %s: initialize failed", cid)
		}
		clients = append(clients, c)
	}

	ed.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"connectionId":"c1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}}`)
	ed.send(`{"jsonrpc":"2.0","id":51,"method":"mcp/message","params":{"connectionId":"c2","method":"roots/list","params":{}}}`)
	sampling, method1, _ := clients[0].recv(t)
	roots, method2, _ := clients[1].recv(t)
	if method1 != "sampling/createMessage" || method2 != "roots/list" {
		t.Fatalf("the clients were asked %s and %s", method1, method2)
	}
	clients[0].send("7", "tools/call", `{"name":"first"}`)
	call1 := ed.recvMsg()
	clients[1].send("7", "tools/call", `{"name":"second"}`)
	call2 := ed.recvMsg()

	// Everything is answered, the second connection first.
	clients[1].s.send(`{"jsonrpc":"2.0","id":` + string(roots) + `,"result":{"roots":[]}}`)
	clients[0].s.send(`{"jsonrpc":"2.0","id":` + string(sampling) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`)
	for range 2 {
		if m := ed.recvMsg(); !m.IsResponse() || m.Error != nil {
			t.Fatalf("the owner got %s, want the answers to its requests", m.Bytes())
		}
	}
	ed.reply(call2, `{"content":[{"type":"text","text":"second"}]}`)
	ed.reply(call1, `{"content":[{"type":"text","text":"first"}]}`)
	for i, c := range clients {
		if id, errObj, result := c.recvResult(t); string(id) != "7" || errObj != nil || result == nil {
			t.Fatalf("client %d: tools/call answered %s %s %s", i+1, id, errObj, result)
		}
	}
	// Each answer was recorded before it was sent on: the trace holds them.
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	events := readTrace(t, out.String())
	answeredOnce(t, events)
	type key struct{ asker, asked, id string }
	asked := map[key]trace.Event{}
	lanes := map[string]bool{}
	for _, ev := range events {
		for _, name := range []string{ev.From, ev.To} {
			if strings.HasPrefix(name, bridgedPrefix) {
				lanes[name] = true
			}
		}
		switch ev.Type {
		case trace.TypeRequest:
			asked[key{ev.From, ev.To, string(ev.ID)}] = ev
		case trace.TypeResponse:
			req := asked[key{ev.To, ev.From, string(ev.ID)}]
			if ev.Method != req.Method || ev.Protocol != req.Protocol {
				t.Errorf("response %s -> %s #%s recorded as %s (%s), its request as %s (%s)",
					ev.From, ev.To, ev.ID, ev.Method, ev.Protocol, req.Method, req.Protocol)
			}
		}
	}
	if len(lanes) != 2 || !lanes["mcp:tools"] || !lanes["mcp:tools#2"] {
		t.Errorf("the bridged connections are traced as %v, want mcp:tools and mcp:tools#2", lanes)
	}
	for _, want := range []struct{ from, to, method string }{
		{"client", "mcp:tools", "sampling/createMessage"},
		{"client", "mcp:tools#2", "roots/list"},
		{"mcp:tools", "client", "tools/call"},
		{"mcp:tools#2", "client", "tools/call"},
	} {
		found := false
		for k, ev := range asked {
			found = found || k.asker == want.from && k.asked == want.to && ev.Method == want.method
		}
		if !found {
			t.Errorf("no %s request from %s to %s in the trace:\n%s", want.method, want.from, want.to, &out)
		}
	}
}

// TestTraceRedactsBridgeTokens: the declaration of a bridged MCP server
// carries the token its client is to present (in a stdio server's env, an
// HTTP server's Authorization header). The agent gets it; the trace, at
// either detail, in its file and its live stream, holds it nowhere, and
// shows the declaration with the token redacted.
func TestTraceRedactsBridgeTokens(t *testing.T) {
	for _, tc := range []struct {
		mode BridgeMode
		caps string
	}{{BridgeStdio, `{}`}, {BridgeHTTP, `{"http":true}`}} {
		for _, detail := range trace.Details {
			t.Run(string(tc.mode)+"/"+string(detail), func(t *testing.T) {
				var out bytes.Buffer
				hub := trace.NewHub(0)
				rec := trace.NewRecorder(&out, trace.Options{Detail: detail, Live: hub})
				_, _, declared := mcpChainWith(t, tc.caps, Config{MCPBridge: tc.mode, Trace: rec})
				var d struct {
					Env, Headers []struct{ Name, Value string }
				}
				json.Unmarshal(declared, &d)
				token := ""
				for _, v := range append(d.Env, d.Headers...) {
					if v.Name == "ACP_CONDUCTOR_MCP_TOKEN" || v.Name == "Authorization" {
						token = strings.TrimPrefix(v.Value, "Bearer ")
					}
				}
				if len(token) < 32 {
					t.Fatalf("the agent was declared %s, without its token", declared)
				}
				if err := rec.Close(); err != nil {
					t.Fatal(err)
				}
				live, _ := hub.Snapshot()
				if strings.Contains(out.String(), token) || strings.Contains(string(bytes.Join(live, nil)), token) {
					t.Errorf("the trace holds the token the agent was declared:\n%s", &out)
				}
				if detail == trace.Full && !strings.Contains(out.String(), `[redacted]"`) {
					t.Errorf("the trace does not show the declaration redacted:\n%s", &out)
				}
			})
		}
	}
}

// TestTraceBridgedRequestBinding traces a bridged client's calls to a
// server whose owner binds per request (the TypeScript SDK's provider),
// which answers an MCP call with an ACP result that holds the MCP
// response. An MCP error is an error in the trace, whose code a metadata
// trace keeps; the client's notifications/cancelled, which reaches the
// owner as $/cancel_request, is recorded as the client's.
func TestTraceBridgedRequestBinding(t *testing.T) {
	for _, detail := range trace.Details {
		t.Run(string(detail), func(t *testing.T) {
			var out bytes.Buffer
			rec := trace.NewRecorder(&out, trace.Options{Detail: detail})
			ed, _, declared := mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, Trace: rec})
			c := &mcpUser{s: startShim(t, declared)}
			c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
			connect := ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			ed.reply(ed.recvMsg(), `{"result":{"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
			c.recvResult(t)

			c.send("7", "tools/call", `{"name":"nope"}`)
			ed.reply(ed.recvMsg(), `{"error":{"code":-32602,"message":"no tool nope"}}`)
			if _, errObj, _ := c.recvResult(t); errObj == nil {
				t.Fatal("the client's call to no tool succeeded")
			}
			c.send("8", "tools/call", `{"name":"wait"}`)
			wait := ed.recvMsg()
			c.send("", "notifications/cancelled", `{"requestId":8,"reason":"user"}`)
			if m := ed.recvMsg(); m.Method != wire.MethodCancelRequest {
				t.Fatalf("the owner got %s, want the cancel", m.Bytes())
			}
			ed.reply(wait, `{"error":{"code":-32800,"message":"cancelled"}}`)
			c.recvResult(t)
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}

			var got []string
			for _, ev := range readTrace(t, out.String()) {
				if ev.From != "mcp:tools" && ev.To != "mcp:tools" || ev.Method != "tools/call" && ev.Type != trace.TypeNotification {
					continue
				}
				s := fmt.Sprintf("%s %s %s -> %s %s %s", ev.Type, ev.Protocol, ev.From, ev.To, ev.ID, ev.Method)
				if ev.IsError != nil {
					s += fmt.Sprintf(" is_error=%v %s", *ev.IsError, ev.Payload)
				}
				got = append(got, s)
			}
			answers := map[trace.Detail][2]string{
				trace.Full:     {`{"code":-32602,"message":"no tool nope"}`, `{"code":-32800,"message":"cancelled"}`},
				trace.Metadata: {`{"code":-32602}`, `{"code":-32800}`},
			}[detail]
			want := []string{
				"request mcp mcp:tools -> client 3 tools/call",
				"response mcp client -> mcp:tools 3 tools/call is_error=true " + answers[0],
				"request mcp mcp:tools -> client 4 tools/call",
				"notification mcp mcp:tools -> client  notifications/cancelled",
				"response mcp client -> mcp:tools 4 tools/call is_error=true " + answers[1],
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the bridged client's calls are traced as\n%s\nwant\n%s\n\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), &out)
			}
		})
	}
}
