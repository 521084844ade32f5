package conductor

import (
	"fmt"
	"io"
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
	if m := prompt(78, 2*limit); string(m.ID) != "78" || !strings.Contains(string(m.Error), "limit of 4096") {
		t.Errorf("oversize response: %s", e.seen[len(e.seen)-1])
	}
	if m := prompt(79, limit-200); string(m.ID) != "79" || m.Error != nil || len(m.Result) < limit-200 {
		t.Errorf("response under the limit was not delivered whole: %.200s", e.seen[len(e.seen)-1])
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
