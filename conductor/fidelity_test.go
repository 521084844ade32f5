package conductor

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestResponseWithNullError: an answer written with "error": null beside
// its result, as some encoders write responses, reaches the asker as its
// result alone, not as {"error":null} nor with the member, which the
// TypeScript SDK refuses (-32600): wherever the member comes, however its
// name is spelled, and for a result large enough to go out from the line
// it came in. The result goes on byte for byte, _meta and members no schema
// has included, under the asker's id as it asked.
func TestResponseWithNullError(t *testing.T) {
	ed, ag := agentChain(t)
	large := `{"content":"` + strings.Repeat("x", largeValue) + `"}`
	for i, tt := range []struct {
		name    string
		members string // the answer's members after its id: result with its error
		result  string // the result it carries
	}{
		{"after", `"result":%s,"error":null`, `{"content":"hello","_meta":{"k":[1,{"v":null}]},"x-unknown":true}`},
		{"before", `"error":null,"result":%s`, `{"content":"a"}`},
		{"spaced", `"result" : %s , "error" : null `, `{"content":"b"}`},
		{"escaped name", `"result":%s,"err\u006fr":null`, `{"content":"c"}`},
		{"null result", `"result":%s,"error":null`, `null`},
		{"large result", `"result":%s,"error":null`, large},
	} {
		id := fmt.Sprintf(`"r-%d"`, i)
		ag.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}`)
		req := ed.recvMsg()
		ed.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,` + fmt.Sprintf(tt.members, tt.result) + `}`)
		if got, want := string(ag.recvLine()), `{"jsonrpc":"2.0","id":`+id+`,"result":`+tt.result+`}`; got != want {
			t.Errorf("%s: the agent got\n%.200s\nwant\n%.200s", tt.name, got, want)
		}
	}
}

// TestUnknownMembersGoOn: a message's top-level members that JSON-RPC does
// not define reach the recipient as they came, after the members the
// conductor writes, whatever it rebuilds: a response under the asker's id
// (a large result too), a request under a new id, a message put in a
// successor envelope (inside its params, with the message they belong to)
// or taken out of one (the members of its params beside method and params
// are the carried message's; its _meta and its own top-level members are
// the envelope's), a cancel, a message that is not relayed as its line,
// and an mcp/message the MCP tables route. Each step is a line one peer
// sends and the line another gets; {id} is the id the receiver sees,
// saved under a name for the lines after.
func TestUnknownMembersGoOn(t *testing.T) {
	ed, p, ag := proxyChain(t, `{"protocolVersion":1}`)
	large := `{"content":"` + strings.Repeat("x", largeValue) + `"}`
	var saved []string
	ids := strings.NewReplacer()
	for _, st := range []struct {
		name       string
		from, to   *scripted
		send, want string
		save       string
	}{
		{"request, re-id'd", ed, p,
			`{"jsonrpc":"2.0","id":"e1","method":"session/prompt","params":{"sessionId":"s","prompt":[]},"x-trace":{"a":[1]}}`,
			`{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{"sessionId":"s","prompt":[]},"x-trace":{"a":[1]}}`, "pp"},
		{"request, unwrapped", p, ag,
			`{"jsonrpc":"2.0","id":"p1","method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s","prompt":[]},"_meta":{"env":1},"x-trace":{"a":[1]},"id":9},"x-env":true}`,
			`{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{"sessionId":"s","prompt":[]},"x-trace":{"a":[1]}}`, "ap"},
		{"notification, wrapped", ag, p,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"},"x-u":1}`,
			`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s"},"x-u":1}}`, ""},
		{"request, wrapped", ag, p,
			`{"jsonrpc":"2.0","id":"a1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"},"x-q":"?"}`,
			`{"jsonrpc":"2.0","id":{id},"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"},"x-q":"?"}}`, "pr"},
		{"response", p, ag,
			`{"jsonrpc":"2.0","id":{pr},"result":{"content":"c"},"x-r":1}`,
			`{"jsonrpc":"2.0","id":"a1","result":{"content":"c"},"x-r":1}`, ""},
		{"response with error null", ag, p,
			`{"jsonrpc":"2.0","id":{ap},"error":null,"result":{"stopReason":"end_turn"},"x-r":[2]}`,
			`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"},"x-r":[2]}`, ""},
		{"notification, not plain", p, ed,
			`{"jsonrpc":"2.0","m\u0065thod":"session/update","params":{"sessionId":"s"},"x\u002dn":null}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"},"x\u002dn":null}`, ""},
		{"cancel", ed, p,
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"e1"},"x-c":1}`,
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{pp}},"x-c":1}`, ""},
		{"error", p, ed,
			`{"jsonrpc":"2.0","id":{pp},"error":{"code":-32800,"message":"cancelled"},"x-e":{}}`,
			`{"jsonrpc":"2.0","id":"e1","error":{"code":-32800,"message":"cancelled"},"x-e":{}}`, ""},
		{"request for a large answer", ag, p,
			`{"jsonrpc":"2.0","id":"a2","method":"fs/read_text_file","params":{"sessionId":"s","path":"/y"}}`,
			`{"jsonrpc":"2.0","id":{id},"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"sessionId":"s","path":"/y"}}}`, "pr2"},
		{"large response", p, ag,
			`{"jsonrpc":"2.0","id":{pr2},"result":` + large + `,"x-big":"b"}`,
			`{"jsonrpc":"2.0","id":"a2","result":` + large + `,"x-big":"b"}`, ""},
		{"notification without params, unwrapped", p, ag,
			`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"x/ping","x":1}}`,
			`{"jsonrpc":"2.0","method":"x/ping","x":1}`, ""},
		{"notification without params, wrapped", ag, p,
			`{"jsonrpc":"2.0","method":"x/pong","x":2}`,
			`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"x/pong","x":2}}`, ""},
		{"mcp/message the MCP tables route", p, ag,
			`{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":"x","requestId":"r","method":"notifications/progress"},"x-m":1}`,
			`{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":"x","requestId":"r","method":"notifications/progress"},"x-m":1}`, ""},
	} {
		st.from.send(ids.Replace(st.send))
		got := st.to.recvLine()
		id := string(mustParse(t, got).ID)
		if want := strings.ReplaceAll(ids.Replace(st.want), "{id}", id); string(got) != want {
			t.Errorf("%s: got\n%.300s\nwant\n%.300s", st.name, got, want)
		}
		if st.save != "" {
			saved = append(saved, "{"+st.save+"}", id)
			ids = strings.NewReplacer(saved...)
		}
	}
}

// TestResponseWithResultAndError: a response with both a result and an
// error, which JSON-RPC 2.0 forbids, reaches the asker as the error alone,
// whichever member comes first and whoever sent it; the first from each
// peer is logged as a warning, the rest counted
// (TestBadResponsesLoggedSparingly).
func TestResponseWithResultAndError(t *testing.T) {
	logs := relayAnswers(t, []answerCase{
		{false, `"result":{"stopReason":"end_turn"},"error":{"code":-32603,"message":"boom","data":[1]}`, `"error":{"code":-32603,"message":"boom","data":[1]}`},
		{false, `"error":{"code":-32000,"message":"no"},"result":null`, `"error":{"code":-32000,"message":"no"}`},
		{true, `"result":{"content":"x"},"error":{"code":-32002,"message":"gone"}`, `"error":{"code":-32002,"message":"gone"}`},
		{true, `"result":{"content":"y"},"error":null`, `"result":{"content":"y"}`}, // the result: no diagnostic
	})
	// Each line was logged before it went on.
	warned := warnedByPeer(logs, logBothAnswers)
	if want := map[string]int{clientName: 1, "agent": 1}; !maps.Equal(warned, want) {
		t.Errorf("warnings %q by peer: %v, want %v", logBothAnswers, warned, want)
	}
	if n := logs.FilterMessage(logBothAnswers).Len(); n != 2 {
		t.Errorf("%d responses with both members logged, want 2: the first of each peer", n)
	}
}

// TestResponseWithMalformedError: an answer whose error is not an object
// with an integer code and a string message, which the TypeScript SDK does
// not read as a response, reaches the asker as the conductor's -32603,
// naming who answered, with the error as it came in data; whoever
// answered. A well-formed error goes on as it came. The first malformed
// error from each peer is logged as a warning, the rest counted
// (TestBadResponsesLoggedSparingly).
func TestResponseWithMalformedError(t *testing.T) {
	const (
		byAgent  = `"error":{"code":-32603,"message":"component \"agent\" answered with a malformed error, not an object with an integer code and a string message","data":%s}`
		byClient = `"error":{"code":-32603,"message":"client answered with a malformed error, not an object with an integer code and a string message","data":%s}`
	)
	logs := relayAnswers(t, []answerCase{
		{false, `"error":null`, fmt.Sprintf(byAgent, `null`)},
		{false, `"error":"boom"`, fmt.Sprintf(byAgent, `"boom"`)},
		{false, `"error":{"code":"-32000","message":"no"}`, fmt.Sprintf(byAgent, `{"code":"-32000","message":"no"}`)},
		{false, `"error":{"code":-32000.5,"message":"no"}`, fmt.Sprintf(byAgent, `{"code":-32000.5,"message":"no"}`)},
		{false, `"error" : { "code" : 1 , "data" : "<&>" }`, fmt.Sprintf(byAgent, `{ "code" : 1 , "data" : "<&>" }`)},
		{false, `"result":{"stopReason":"end_turn"},"error":[1]`, fmt.Sprintf(byAgent, `[1]`)},
		{false, `"error":{"code":-32000,"message":"no","data":null}`, `"error":{"code":-32000,"message":"no","data":null}`}, // as it came
		{true, `"error":null`, fmt.Sprintf(byClient, `null`)},
		{true, `"err\u006fr":{"message":"gone"}`, fmt.Sprintf(byClient, `{"message":"gone"}`)},
	})
	warned := warnedByPeer(logs, logMalformedError)
	if want := map[string]int{clientName: 1, "agent": 1}; !maps.Equal(warned, want) {
		t.Errorf("warnings %q by peer: %v, want %v", logMalformedError, warned, want)
	}
	if n := logs.FilterMessage(logMalformedError).Len(); n != 2 {
		t.Errorf("%d malformed errors logged, want 2: the first of each peer", n)
	}
}

// TestResponseNotJSONRPC: an answer that is no JSON-RPC 2.0 message (its
// "jsonrpc" missing or another version, or neither result nor error) fails the call it answers with
// the conductor's -32603, naming who answered and why, as the TypeScript
// SDK fails it (-32600), rather than leave it unanswered; whoever
// answered. The editor is told of its own line too, under null.
func TestResponseNotJSONRPC(t *testing.T) {
	const why = ` answered with a message that is not JSON-RPC 2.0 (\"jsonrpc\" must be \"2.0\")"}}`
	ed, ag := agentChain(t)
	ed.send(`{"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	m := ag.recvMsg()
	ag.send(`{"id":` + string(m.ID) + `,"result":{"stopReason":"end_turn"}}`)
	if got, want := string(ed.recvLine()), `{"jsonrpc":"2.0","id":20,"error":{"code":-32603,"message":"component \"agent\"`+why; got != want {
		t.Errorf("the editor got\n%s\nwant\n%s", got, want)
	}
	ed.send(`{"jsonrpc":"2.0","id":21,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	m = ag.recvMsg()
	ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `}`)
	if got, want := string(ed.recvLine()), `{"jsonrpc":"2.0","id":21,"error":{"code":-32603,"message":"component \"agent\" answered with a message that is not JSON-RPC 2.0 (no method, result or error)"}}`; got != want {
		t.Errorf("the editor got\n%s\nwant\n%s", got, want)
	}
	ag.send(`{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}`)
	m = ed.recvMsg()
	ed.send(`{"jsonrpc":"1.0","id":` + string(m.ID) + `,"result":{"content":"x"}}`)
	if got, want := string(ed.recvLine()), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`; !strings.HasPrefix(got, want) {
		t.Errorf("the editor got\n%s\nwant it to start\n%s", got, want)
	}
	if got, want := string(ag.recvLine()), `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"client`+why; got != want {
		t.Errorf("the agent got\n%s\nwant\n%s", got, want)
	}
}

// TestResponseIDSpelledOtherwise: a peer that re-encodes the conductor's
// integer ids (5.0, 5e0) is answered as the TypeScript SDK answers it, by
// the number JSON.parse reads; a fraction answers nothing.
func TestResponseIDSpelledOtherwise(t *testing.T) {
	ed, ag := agentChain(t)
	for i, spell := range []string{"%d.0", "%de0", "%d0e-1"} {
		ed.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`, 20+i))
		m := ag.recvMsg()
		n, err := strconv.Atoi(string(m.ID))
		if err != nil {
			t.Fatalf("the conductor's id %s", m.ID)
		}
		ag.send(`{"jsonrpc":"2.0","id":` + fmt.Sprintf(spell, n) + `,"result":{"stopReason":"end_turn"}}`)
		if got, want := string(ed.recvLine()), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`, 20+i); got != want {
			t.Errorf("answered as %s, the editor got\n%s\nwant\n%s", fmt.Sprintf(spell, n), got, want)
		}
	}
	ed.send(`{"jsonrpc":"2.0","id":30,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	m := ag.recvMsg()
	ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `.5,"result":{"stopReason":"end_turn"}}`)
	ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"stopReason":"cancelled"}}`)
	if got, want := string(ed.recvLine()), `{"jsonrpc":"2.0","id":30,"result":{"stopReason":"cancelled"}}`; got != want {
		t.Errorf("the editor got %s, want %s: a fraction is no id of the conductor's", got, want)
	}
}

// TestCancelKeepsMeta: a cancel goes on under the id the next hop saw,
// and with everything else it carried: _meta (W3C trace context, which
// the meta-propagation RFD reserves there) included.
func TestCancelKeepsMeta(t *testing.T) {
	ed, ag := agentChain(t)
	ed.send(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	prompt := ag.recvMsg()
	ed.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7,"_meta":{"traceparent":"00-abc-def-01"}}}`)
	want := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + string(prompt.ID) + `,"_meta":{"traceparent":"00-abc-def-01"}}}`
	if got := ag.recvLine(); string(got) != want {
		t.Errorf("the agent got %s, want %s", got, want)
	}
}

// TestComponentBatch: JSON-RPC lets either side send a batch. A
// component's is relayed entry by entry like the editor's, and the answers
// to its requests go back to it as one array.
func TestComponentBatch(t *testing.T) {
	ed, ag := agentChain(t)
	ag.send(`[{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","n":1}},` +
		`{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}},` +
		`{"jsonrpc":"2.0","id":6,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/y"}}]`)
	if m := ed.recvMsg(); m.Method != "session/update" {
		t.Fatalf("the editor got %s, want the update first", m.Bytes())
	}
	first, second := ed.recvMsg(), ed.recvMsg()
	ed.reply(second, `{"content":"y"}`)
	ed.reply(first, `{"content":"x"}`)
	got := string(ag.recvLine())
	if !strings.HasPrefix(got, "[") || !strings.Contains(got, `{"jsonrpc":"2.0","id":5,"result":{"content":"x"}}`) ||
		!strings.Contains(got, `{"jsonrpc":"2.0","id":6,"result":{"content":"y"}}`) {
		t.Errorf("the agent got %s, want both answers in one array", got)
	}
}

// TestMCPMessagePassedOn: the agent's request-binding mcp/message for a
// server no one in the chain declared goes by position, like any message,
// and a proxy passes it on toward the editor, which gets it unchanged and
// answers. It must not be taken for a server's message back to the agent
// and turned around to it.
func TestMCPMessagePassedOn(t *testing.T) {
	ed, p, ag := proxyChain(t, `{"protocolVersion":1}`)

	const params = `{"serverId":"elsewhere","requestId":"r1","method":"tools/call","params":{"name":"x"},"_meta":{"k":"v"},"extra":[1]}`
	ag.send(`{"jsonrpc":"2.0","id":"a1","method":"mcp/message","params":` + params + `}`)
	wrapped := p.recvMsg()
	inner, raw, err := wrapped.Unwrap()
	if err != nil || inner != "mcp/message" || string(raw) != params {
		t.Fatalf("the proxy got %s", wrapped.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":7,"method":"mcp/message","params":` + params + `}`)
	m := ed.recvMsg()
	if m.Method != "mcp/message" || string(m.Params) != params {
		t.Fatalf("the editor got %s, want the mcp/message the proxy passed on", m.Bytes())
	}
	ed.reply(m, `{"result":{"content":[]}}`)
	if got := p.recvMsg(); string(got.ID) != "7" || string(got.Result) != `{"result":{"content":[]}}` {
		t.Fatalf("the proxy got %s", got.Bytes())
	}
	p.reply(wrapped, `{"result":{"content":[]}}`)
	if got := ag.recvLine(); string(got) != `{"jsonrpc":"2.0","id":"a1","result":{"result":{"content":[]}}}` {
		t.Errorf("the agent got %s", got)
	}
}

// TestMCPMessageFromEditor: the editor's mcp/message naming a server no
// one in the chain declared goes to the first proxy, as the editor's other
// messages do, request or notification, and unchanged: neither is taken
// for a server's message back to the agent and sent past the proxies.
func TestMCPMessageFromEditor(t *testing.T) {
	ed, p, ag := proxyChain(t, `{"protocolVersion":1}`)
	// toProxy returns what the proxy gets next, failing if the agent gets
	// something first.
	toProxy := func(what string) *wire.Message {
		t.Helper()
		select {
		case l := <-p.lines:
			return mustParse(t, l)
		case l := <-ag.lines:
			t.Fatalf("the agent got the editor's %s: %s", what, l)
		case <-time.After(20 * time.Second):
			t.Fatalf("the editor's %s reached no one", what)
		}
		return nil
	}

	const note = `{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":"elsewhere","requestId":"r1","method":"notifications/progress","params":{"progress":1}}}`
	ed.send(note)
	if m := toProxy("notification"); string(m.Raw) != note {
		t.Fatalf("for the editor's notification, the proxy got %s", m.Raw)
	}
	const params = `{"serverId":"elsewhere","requestId":"r2","method":"tools/call","params":{"name":"x"}}`
	ed.send(`{"jsonrpc":"2.0","id":"e1","method":"mcp/message","params":` + params + `}`)
	m := toProxy("request")
	if m.Method != "mcp/message" || !m.IsRequest() || string(m.Params) != params {
		t.Fatalf("for the editor's request, the proxy got %s", m.Raw)
	}
	p.reply(m, `{"result":{"content":[]}}`)
	if got := ed.recvLine(); string(got) != `{"jsonrpc":"2.0","id":"e1","result":{"result":{"content":[]}}}` {
		t.Fatalf("the editor got %s", got)
	}

	// Progress on a call to a server the editor declared goes back as the
	// call came, straight to the agent, ahead of the call's answer.
	ed.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"ed-1"}]}}`)
	setup := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":"pn","method":"proxy/successor","params":{"method":"session/new","params":` + string(setup.Params) + `}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s1"}`)
	p.reply(setup, string(p.recvMsg().Result))
	ed.recvMsg()
	ag.send(`{"jsonrpc":"2.0","id":"a1","method":"mcp/message","params":{"serverId":"ed-1","requestId":"r3","method":"tools/call","params":{}}}`)
	probe := ed.recvMsg() // is the owner's binding per connection?
	if probe.Method != methodMCPConnect {
		t.Fatalf("the editor, the server's owner, got %s; want mcp/connect", probe.Bytes())
	}
	ed.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
	call := ed.recvMsg()
	if call.Method != "mcp/message" {
		t.Fatalf("the editor, the server's owner, got %s", call.Bytes())
	}
	progress := `{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":"ed-1","requestId":"r3","method":"notifications/progress","params":{"progress":1}}}`
	ed.send(progress)
	ed.reply(call, `{"result":{"content":[]}}`)
	if got := ag.recvLine(); string(got) != progress {
		t.Fatalf("the agent got %s, want the owner's progress first", got)
	}
	if m := ag.recvMsg(); string(m.ID) != `"a1"` || m.Error != nil {
		t.Fatalf("the agent got %s, want its call answered", m.Bytes())
	}
}

// TestMCPMessageFromProxyLeavesAgentSpelling: a proxy that calls a declared
// server by its serverId says nothing of how the agent spells server ids,
// so the declarations the agent gets later are still given the RFD's id
// beside the schema's serverId, as for an agent not yet heard from.
func TestMCPMessageFromProxyLeavesAgentSpelling(t *testing.T) {
	ed, p, ag := proxyChain(t, `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)

	newSession := func(id, server string) *wire.Message {
		ed.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"` + server + `"}]}}`)
		m := p.recvMsg()
		p.send(`{"jsonrpc":"2.0","id":"p` + id + `","method":"proxy/successor","params":{"method":"session/new","params":` + string(m.Params) + `}}`)
		got := ag.recvMsg()
		ag.reply(got, `{"sessionId":"s-`+id+`"}`)
		p.reply(m, string(p.recvMsg().Result))
		ed.recvMsg()
		return got
	}
	newSession("n1", "srv-1")
	p.send(`{"jsonrpc":"2.0","id":7,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/list"}}`)
	if m := ed.recvMsg(); !strings.HasPrefix(m.Method, "mcp/") {
		t.Fatalf("the editor, the server's owner, got %s", m.Bytes())
	}
	declared := newSession("n2", "srv-2")
	if servers := string(wire.Member(declared.Params, "mcpServers")); !strings.Contains(servers, `"id":"srv-2"`) {
		t.Errorf("after a proxy's call, the agent was declared %s; want the RFD's id added", servers)
	}
}

// proxyChain starts editor, conductor, a scripted proxy and a scripted
// agent, and plays the proxy's part of initialize, the agent answering
// with agentInit.
func proxyChain(t *testing.T, agentInit string) (ed, p, ag *scripted) {
	t.Helper()
	ed, ps, ag := proxiesChain(t, 1, agentInit)
	return ed, ps[0], ag
}

// proxiesChain is proxyChain with n scripted proxies, in chain order.
func proxiesChain(t *testing.T, n int, agentInit string) (ed *scripted, ps []*scripted, ag *scripted) {
	t.Helper()
	dir := t.TempDir()
	var comps []Component
	var started []func() *scripted
	for i := range n {
		comp, proxyStarted := scriptedComponent(t, dir, fmt.Sprintf("proxy%d", i+1))
		comps, started = append(comps, comp), append(started, proxyStarted)
	}
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	ed = scriptedEditor(startChain(t, Config{Proxies: comps, Agent: agent}))
	for _, s := range started {
		ps = append(ps, s())
	}
	ag = agentStarted()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	inits := make([]*wire.Message, n)
	for i, p := range ps {
		inits[i] = p.recvMsg()
		p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	}
	ag.reply(ag.recvMsg(), agentInit)
	for i := n - 1; i >= 0; i-- {
		ps[i].recvMsg()
		ps[i].reply(inits[i], `{"protocolVersion":1}`)
	}
	ed.recvMsg()
	return ed, ps, ag
}

// warnedByPeer counts, by the peer each names, the entries logged at warn
// level with message msg.
func warnedByPeer(logs *observer.ObservedLogs, msg string) map[string]int {
	warned := map[string]int{}
	for _, e := range logs.FilterMessage(msg).All() {
		if e.Level == zap.WarnLevel {
			warned[e.ContextMap()["peer"].(string)]++
		}
	}
	return warned
}

// An answerCase is a request's answer and what its asker should get: the
// members after the id in each, the agent answering the editor's
// session/prompt, or, fromEditor, the editor the agent's
// fs/read_text_file.
type answerCase struct {
	fromEditor   bool
	answer, want string
}

// relayAnswers runs each case through a chain of one scripted agent, in
// order, each request under its own id, and returns what the conductor
// logged.
func relayAnswers(t *testing.T, cases []answerCase) *observer.ObservedLogs {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	comp, started := scriptedComponent(t, t.TempDir(), "agent")
	ed := scriptedEditor(startChain(t, Config{Agent: comp,
		Logger: zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))}))
	ag := started()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	ed.recvMsg()
	for i, tt := range cases {
		asker, answerer := ed, ag
		req := `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`
		if tt.fromEditor {
			asker, answerer = ag, ed
			req = `{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/x"}}`
		}
		asker.send(fmt.Sprintf(req, 10+i))
		m := answerer.recvMsg()
		answerer.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + tt.answer + `}`)
		if got, want := string(asker.recvLine()), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, 10+i, tt.want); got != want {
			t.Errorf("answered with %s, the asker got\n%s\nwant\n%s", tt.answer, got, want)
		}
	}
	return logs
}
