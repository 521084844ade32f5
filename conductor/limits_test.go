package conductor

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

func TestBatch(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	e.send(`[]`)
	if m := e.recvMsg(); string(m.ID) != "null" || !strings.Contains(string(m.Error), "-32600") {
		t.Errorf("empty batch: %s", e.seen[len(e.seen)-1])
	}

	e.send(`[{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}},` +
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}},` +
		`42,` +
		`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{}}]`)
	got := e.recv()
	var entries []string
	wire.EachElement([]byte(got), func(v []byte) { entries = append(entries, string(v)) })
	want := map[string]bool{
		`{"jsonrpc":"2.0","id":"a","result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}}`: true,
		`{"jsonrpc":"2.0","id":"b","result":{"sessionId":"s1"}}`:                                                         true,
	}
	for _, en := range entries {
		if want[en] {
			delete(want, en)
		} else if !strings.Contains(en, `"id":null`) || !strings.Contains(en, "-32600") {
			t.Errorf("unexpected batch entry %s", en)
		}
	}
	if len(entries) != 3 || len(want) != 0 {
		t.Errorf("batch response %s; missing %v", got, want)
	}

	// A batch of notifications gets no response: the next line answers
	// the request after it.
	e.send(`[{"jsonrpc":"2.0","method":"session/cancel","params":{}},{"jsonrpc":"2.0","method":"_x/note"}]`)
	e.send(`{"jsonrpc":"2.0","id":"c","method":"session/new","params":{}}`)
	if m := e.recvMsg(); string(m.ID) != `"c"` {
		t.Errorf("after a notification batch got %s", e.seen[len(e.seen)-1])
	}
}

func TestOversize(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies:         []Component{fake(t, dir, "p", "proxy")},
		Agent:           fake(t, dir, "agent", "streamer"),
		MaxMessageBytes: limit,
	})
	e.send(initLine)
	e.recvMsg()

	// From the editor: the request is answered with an error, not relayed.
	e.send(`{"jsonrpc":"2.0","id":77,"method":"session/prompt","params":{"text":"` + strings.Repeat("a", 3*limit) + `"}}`)
	if m := e.recvMsg(); string(m.ID) != "77" || !strings.Contains(string(m.Error), "limit of 4096") {
		t.Errorf("oversize request: %s", e.seen[len(e.seen)-1])
	}

	// From the agent: a response over the limit fails the call that
	// awaited it instead of leaving it hanging. Just under the limit passes.
	prompt := func(id, pad int) *wire.Message {
		e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","_meta":{"tag":"t","updates":0,"pad":%d}}}`, id, pad))
		return e.recvMsg()
	}
	if m := prompt(78, 2*limit); string(m.ID) != "78" || errorCode(m.Error) != codeInternalError ||
		!strings.Contains(errorMessage(m.Error), `component "agent" answered with a message longer than the limit of 4096`) {
		t.Errorf("oversize response: %s; want the conductor's error naming the agent", e.seen[len(e.seen)-1])
	}
	if m := prompt(79, limit-200); string(m.ID) != "79" || m.Error != nil || len(m.Result) < limit-200 {
		t.Errorf("response under the limit was not delivered whole: %.200s", e.seen[len(e.seen)-1])
	}
}

// TestOversizeBatch: a batch over the limit is answered as a batch would
// be, with an error for each request in it wherever its id comes, and
// nothing for its notifications; the conductor says what it dropped, and
// the chain goes on.
func TestOversizeBatch(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Proxies:         []Component{fake(t, dir, "p", "proxy")},
		Agent:           fake(t, dir, "agent", "streamer"),
		MaxMessageBytes: limit,
		Logger:          log,
	})
	e.send(initLine)
	e.recvMsg()

	e.send(`[{"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{"sessionId":"s","text":"` + strings.Repeat("a", 2*limit) + `"}},` +
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}},` +
		`{"jsonrpc":"2.0","params":{"text":"` + strings.Repeat("b", 2*limit) + `"},"method":"session/prompt","id":7}]`)
	// The batch's answer comes before that of the request sent after it,
	// which goes through the chain.
	e.send(`{"jsonrpc":"2.0","id":"after","method":"session/new","params":{}}`)
	got := e.recv()
	var ids []string
	wire.EachElement([]byte(got), func(v []byte) {
		m, err := wire.Parse(v)
		if err != nil || errorCode(m.Error) != codeInvalidRequest || !strings.Contains(errorMessage(m.Error), "limit of 4096") {
			t.Errorf("batch entry %s, want a refusal naming the limit", v)
			return
		}
		ids = append(ids, string(m.ID))
	})
	if !wire.IsBatch([]byte(got)) || strings.Join(ids, " ") != `"a" 7` {
		t.Fatalf("the oversize batch was answered %.300s; want a batch refusing \"a\" and 7", got)
	}
	if m := e.recvMsg(); string(m.ID) != `"after"` || m.Error != nil {
		t.Errorf("after the oversize batch: %s", e.seen[len(e.seen)-1])
	}
	logs.wait(t, "dropped oversize batch")

	// A batch of notifications only gets no answer.
	e.send(`[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","pad":"` + strings.Repeat("c", 2*limit) + `"}}]`)
	e.send(`{"jsonrpc":"2.0","id":"next","method":"session/new","params":{}}`)
	if m := e.recvMsg(); string(m.ID) != `"next"` || m.Error != nil {
		t.Errorf("after an oversize batch of notifications: %s", e.seen[len(e.seen)-1])
	}
}

// TestOversizeBatchPastBounds: of a batch over the limit, the conductor
// keeps the ids of the first 65,536 requests and responses only, and none
// over 1 KiB, however long the batch goes on. Each request whose id it
// kept is refused under it, as ever; those whose ids it could not keep are
// answered once, together, under null, as JSON-RPC answers a request whose
// id it cannot read, with how many they were; and it says so, responses
// past the bound too, whose calls it cannot tell.
func TestOversizeBatchPastBounds(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Agent:           fake(t, dir, "agent", "streamer"),
		MaxMessageBytes: limit,
		Logger:          log,
	})
	e.send(initLine)
	e.recvMsg()

	const kept = 1 << 16 // wire's maxBatchEntries
	var b strings.Builder
	b.WriteString(`[{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 2048) + `","method":"session/prompt"}`)
	for i := range kept + 2 {
		fmt.Fprintf(&b, `,{"jsonrpc":"2.0","id":%d,"method":"session/prompt"}`, i)
	}
	b.WriteString(`,{"jsonrpc":"2.0","id":99,"result":{}}]`)
	e.send(b.String())
	e.send(`{"jsonrpc":"2.0","id":"after","method":"session/new","params":{}}`)

	var ids, nulls []string
	wire.EachElement([]byte(e.recv()), func(v []byte) {
		m, err := wire.Parse(v)
		if err != nil || errorCode(m.Error) != codeInvalidRequest {
			t.Fatalf("batch entry %s, want a refusal", v)
		}
		if string(m.ID) == "null" {
			nulls = append(nulls, errorMessage(m.Error))
			return
		}
		if want := strconv.Itoa(len(ids)); string(m.ID) != want {
			t.Fatalf("refusal %d is under id %s, want %s", len(ids), m.ID, want)
		}
		ids = append(ids, string(m.ID))
	})
	if len(ids) != kept {
		t.Errorf("%d requests refused under their ids, want %d", len(ids), kept)
	}
	if len(nulls) != 1 || !strings.Contains(nulls[0], "answers 3 of its requests") {
		t.Errorf("refusals under null: %q; want one, for the 3 requests whose ids were not kept", nulls)
	}
	if m := e.recvMsg(); string(m.ID) != `"after"` || m.Error != nil {
		t.Errorf("after the oversize batch: %s", e.seen[len(e.seen)-1])
	}
	logs.wait(t, logBatchUnkept)

	// A request alone whose id is too long to keep is answered under null.
	e.send(`{"jsonrpc":"2.0","id":"` + strings.Repeat("j", 2048) + `","method":"session/prompt","params":{"text":"` + strings.Repeat("a", 2*limit) + `"}}`)
	if m := e.recvMsg(); string(m.ID) != "null" || !strings.Contains(errorMessage(m.Error), "limit of 4096") {
		t.Errorf("an oversize request whose id was not kept was answered %s", e.seen[len(e.seen)-1])
	}
}

// TestOversizeBatchFromComponent: a component's batch over the limit
// fails the calls its responses answered, and its requests are refused in
// a batch back to it; the turn goes on.
func TestOversizeBatchFromComponent(t *testing.T) {
	const limit = 4096
	comp, started := scriptedComponent(t, t.TempDir(), "agent")
	ed := scriptedEditor(startChain(t, Config{Agent: comp, MaxMessageBytes: limit}))
	ag := started()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	ed.recvMsg()

	ed.send(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	prompt := ag.recvMsg()
	ag.send(`[{"jsonrpc":"2.0","id":"q","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/` + strings.Repeat("d", 2*limit) + `"}},` +
		`{"jsonrpc":"2.0","result":{"stopReason":"end_turn","pad":"` + strings.Repeat("e", 2*limit) + `"},"id":` + string(prompt.ID) + `}]`)
	ag.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"later"}}}}`)
	// The prompt fails before the update sent after its dropped answer
	// arrives.
	if m := ed.recvMsg(); string(m.ID) != "5" || !strings.Contains(errorMessage(m.Error), `component "agent" answered with a message longer than the limit of 4096`) {
		t.Fatalf("the editor got %s, want its prompt failed, naming the agent", m.Bytes())
	}
	if m := ed.recvMsg(); m.Method != "session/update" {
		t.Errorf("then %s, want the update", m.Bytes())
	}
	got := ag.recvLine()
	var refused []string
	wire.EachElement(got, func(v []byte) {
		if m, err := wire.Parse(v); err == nil && errorCode(m.Error) == codeInvalidRequest {
			refused = append(refused, string(m.ID))
		}
	})
	if !wire.IsBatch(got) || strings.Join(refused, " ") != `"q"` {
		t.Errorf("the agent got %s, want a batch refusing \"q\"", got)
	}
}

// TestOversizeAnswerFromClient: an editor's answer too long to pass on
// (a file read, say) fails the agent's call with the conductor's error,
// which says that the editor's answer, not the agent's request, was too
// long.
func TestOversizeAnswerFromClient(t *testing.T) {
	const limit = 4096
	comp, started := scriptedComponent(t, t.TempDir(), "agent")
	ed := scriptedEditor(startChain(t, Config{Agent: comp, MaxMessageBytes: limit}))
	ag := started()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	ed.recvMsg()

	ag.send(`{"jsonrpc":"2.0","id":"r","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/big"}}`)
	read := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"result":{"content":"` + strings.Repeat("f", 2*limit) + `"}}`)
	m := ag.recvMsg()
	if string(m.ID) != `"r"` || errorCode(m.Error) != codeInternalError ||
		!strings.Contains(errorMessage(m.Error), "client answered with a message longer than the limit of 4096") {
		t.Errorf("the agent got %s; want its call failed, naming the client's answer", m.Bytes())
	}
}

// TestOversizeMembersLast: an over-long message is answered wherever its
// id and method come in it, not only within its first bytes.
func TestOversizeMembersLast(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies:         []Component{fake(t, dir, "p", "proxy")},
		Agent:           fake(t, dir, "agent", "streamer"),
		MaxMessageBytes: limit,
	})
	e.send(initLine)
	e.recvMsg()

	// From the editor, with its id and method last.
	e.send(`{"jsonrpc":"2.0","params":{"text":"` + strings.Repeat("a", 3*limit) + `"},"method":"session/prompt","id":"late"}`)
	if m := e.recvMsg(); string(m.ID) != `"late"` || !strings.Contains(string(m.Error), "limit of 4096") {
		t.Errorf("oversize request with its id last: %s", e.seen[len(e.seen)-1])
	}
	// From the agent, a response with its id last: the call it answers
	// fails, and no other.
	e.send(`{"jsonrpc":"2.0","id":80,"method":"session/prompt","params":{"sessionId":"s","_meta":{"tag":"t","pad":8192,"idLast":true}}}`)
	if m := e.recvMsg(); string(m.ID) != "80" || !strings.Contains(string(m.Error), "limit of 4096") {
		t.Errorf("oversize response with its id last: %s", e.seen[len(e.seen)-1])
	}
}

// TestLimitCountsWhatTheSenderWrote: a message within the limit gets
// through a proxy, although the envelope the proxy sends it on in is a
// little longer; and a line of exactly the limit may end in CR LF.
func TestLimitCountsWhatTheSenderWrote(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies:         []Component{fake(t, dir, "p", "proxy")},
		Agent:           fake(t, dir, "agent", "streamer"),
		MaxMessageBytes: limit,
	})
	e.send(initLine)
	e.recvMsg()
	head := `{"jsonrpc":"2.0","id":90,"method":"session/prompt","params":{"sessionId":"s","_meta":{"tag":"t"},"text":"`
	tail := `"}}`
	line := head + strings.Repeat("b", limit-len(head)-len(tail)) + tail
	if len(line) != limit {
		t.Fatalf("line of %d bytes", len(line))
	}
	if _, err := io.WriteString(e.in, line+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if m := e.recvMsg(); string(m.ID) != "90" || m.Error != nil {
		t.Errorf("a request of exactly the limit, in CR LF, through a proxy: %.300s", e.seen[len(e.seen)-1])
	}
}

// TestOversizeAnswerRunsHook: an owner's answer too long to keep fails
// the call as any failure does, hooks included: the mcp/connect the
// conductor sent to learn the owner's binding is settled, so the agent's
// call that waited for it is answered, not left waiting for ever; and a
// request-binding call whose answer was dropped is forgotten, so that a
// later call under the same serverId and requestId, from someone else,
// gets the owner's progress on it.
func TestOversizeAnswerRunsHook(t *testing.T) {
	const limit = 4096
	pad := strings.Repeat("x", 2*limit)
	dir := t.TempDir()
	pc, pStarted := scriptedComponent(t, dir, "proxy1")
	ac, aStarted := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{pc}, Agent: ac, MaxMessageBytes: limit}))
	p, ag := pStarted(), aStarted()
	ed.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	pinit := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	p.recvMsg()
	p.reply(pinit, `{"protocolVersion":1}`)
	ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	setup := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":"n1","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"p-1"}]}}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s1"}`)
	p.reply(setup, string(p.recvMsg().Result))
	if m := ed.recvMsg(); string(m.ID) != `"n"` || m.Error != nil {
		t.Fatalf("session/new: the editor got %s", m.Bytes())
	}

	// The agent's first call makes the conductor ask the owner how it
	// binds; the owner's answer is too long.
	ag.send(`{"jsonrpc":"2.0","id":"a1","method":"mcp/message","params":{"serverId":"p-1","requestId":1,"method":"tools/list"}}`)
	probe := p.recvMsg()
	if method, _ := carriedMethod(t, probe); method != methodMCPConnect {
		t.Fatalf("the owner got %s; want mcp/connect", probe.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"result":{"connectionId":"c","pad":"` + pad + `"}}`)
	if m := ag.recvMsg(); string(m.ID) != `"a1"` || m.Error == nil {
		t.Fatalf("the agent got %s; want its call failed", m.Bytes())
	}

	// The next call learns the binding: per request.
	ag.send(`{"jsonrpc":"2.0","id":"a2","method":"mcp/message","params":{"serverId":"p-1","requestId":2,"method":"tools/list"}}`)
	call := ownerCalled(t, p)
	p.reply(call, `{"result":{"tools":[]}}`)
	if m := ag.recvMsg(); string(m.ID) != `"a2"` || m.Error != nil {
		t.Fatalf("the agent got %s; want its call answered", m.Bytes())
	}

	// The editor calls requestId 7; its answer is too long.
	ed.send(`{"jsonrpc":"2.0","id":"e1","method":"mcp/message","params":{"serverId":"p-1","requestId":7,"method":"tools/call","params":{"name":"x"}}}`)
	call = p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":{"pad":"` + pad + `"}}`)
	if m := ed.recvMsg(); string(m.ID) != `"e1"` || m.Error == nil {
		t.Fatalf("the editor got %s; want its call failed", m.Bytes())
	}
	// The agent calls requestId 7 in turn; the owner's progress on it is
	// the agent's, not the editor's.
	ag.send(`{"jsonrpc":"2.0","id":"a3","method":"mcp/message","params":{"serverId":"p-1","requestId":7,"method":"tools/call","params":{"name":"x"}}}`)
	call = p.recvMsg()
	progress := `{"serverId":"p-1","requestId":7,"method":"notifications/progress","params":{"progressToken":"t","progress":1}}`
	notifyFrom(p, false, progress)
	p.reply(call, `{"result":{"content":[]}}`)
	if m := ag.recvMsg(); m.Method != methodMCPMessage || string(m.Params) != progress {
		t.Fatalf("the agent got %s; want the owner's progress on its call", m.Bytes())
	}
	if m := ag.recvMsg(); string(m.ID) != `"a3"` {
		t.Fatalf("the agent got %s; want its call answered", m.Bytes())
	}
	ed.send(`{"jsonrpc":"2.0","id":"last","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	m := p.recvMsg()
	if m.Method != "session/new" {
		t.Fatalf("the proxy got %s; want the editor's session/new", m.Bytes())
	}
	p.reply(m, `{"sessionId":"s2"}`)
	if m := ed.recvMsg(); string(m.ID) != `"last"` {
		t.Fatalf("the editor got %s; want its session/new answered, and nothing before", m.Bytes())
	}
}
