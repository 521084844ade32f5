package conductor

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Tracing (package trace) records each message where the relay hands it to
// its destination (relay, and dispatch's path for a line that goes on as
// it came) and each answer where the relay returns it to the caller
// (relayAnswer, failCalls), or drops it because the caller's process was
// restarted since: every request recorded ends in the trace. Each hook is
// one nil test of the recorder, which the chain and each of its peers hold
// (never a call, so that a relayed request costs not a byte more): a chain
// that is not traced pays nothing else.

// traceSend records a request (id != nil) or notification from `from` (nil:
// the conductor) to `to`, as the destination sees it.
func (c *chain) traceSend(from, to *peer, id json.RawMessage, method string, params json.RawMessage) {
	// The trace keeps id, which relayCall makes on its stack: a copy,
	// made only when tracing.
	c.trace.Send(traceName(from), to.name, bytes.Clone(id), method, params, to.pos < 0 || (from != nil && from.pos < 0))
}

// traceReply records the answer to cl: result, or an error object; only
// the first, for a request the conductor answered before the peer did.
func (cl *call) traceReply(result, err json.RawMessage) {
	if cl.traced.Swap(true) {
		return // the trace has its answer already
	}
	body := result
	if err != nil {
		body = err
	}
	cl.to.trace.Reply(cl.to.name, traceName(cl.from), wire.IntID(cl.id), body, err != nil)
}

// traceName names a peer in a trace; the conductor, for calls it makes
// itself, is "conductor".
func traceName(p *peer) string {
	if p == nil {
		return conductorName
	}
	return p.name
}

// bridgedNames hands out the names bridged MCP connections are traced and
// logged under: bridgedPrefix and the server's name, with "#2", "#3", ...
// after it for a connection opened while another of that name is open
// (to the same server, or to another one of that name). Each connection
// numbers the requests it is sent from 1, and a trace pairs a response
// with its request by who was asked and the id: two open connections of
// one name would take each other's answers. A name is free again once its
// connection has ended and failed what it had been asked.
type bridgedNames struct {
	mu   sync.Mutex
	open map[string]bool
}

// take returns a name for a new connection to the server named server.
func (b *bridgedNames) take(server string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]bool{}
	}
	base := bridgedPrefix + server
	name := base
	for n := 2; b.open[name]; n++ {
		name = base + "#" + strconv.Itoa(n)
	}
	b.open[name] = true
	return name
}

// release frees the name of a connection that has ended.
func (b *bridgedNames) release(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, name)
}
