package conductor

import (
	"bytes"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A batch collects the responses to a JSON-RPC batch, from the client or a
// component, which go back as one array once every request in it has been
// answered (JSON-RPC 2.0, section 6). Its entries are relayed one by one
// like any message.
type batch struct {
	to *peer

	mu      sync.Mutex
	waiting int
	lines   [][]byte
}

// answer sends a response line to p, or into b when the request that it
// answers arrived in a batch.
func answer(p *peer, b *batch, line ...[]byte) {
	if b == nil {
		p.send(line...)
		return
	}
	b.add(bytes.Join(line, nil))
}

func (b *batch) add(line []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, bytes.TrimSuffix(line, []byte("\n")))
	if b.waiting--; b.waiting == 0 {
		out := append([]byte{'['}, bytes.Join(b.lines, []byte(","))...)
		b.to.send(append(out, ']', '\n'))
	}
}

// receiveBatch relays each entry of a batch array from the peer at pos.
// Entries that expect a response (requests, and from the client entries
// that are not valid messages) are counted first, so that no early answer
// can complete the batch. A batch of only notifications gets no response;
// an empty one is itself invalid.
func (c *chain) receiveBatch(from *peer, pos int, line []byte) {
	var entries [][]byte
	wire.EachElement(line, func(v []byte) { entries = append(entries, v) })
	if len(entries) == 0 {
		from.send(encodeError(nil, wire.Errorf(codeInvalidRequest, "empty batch")))
		return
	}
	msgs := make([]*wire.Message, len(entries))
	errs := make([]error, len(entries))
	b := &batch{to: from}
	for i, e := range entries {
		msgs[i], errs[i] = wire.Parse(e)
		if errs[i] != nil && pos == 0 || errs[i] == nil && msgs[i].IsRequest() {
			b.waiting++ // a component's bad entry is only logged (badInput)
		}
	}
	for i := range entries {
		if errs[i] != nil {
			c.badInput(from, pos, entries[i], errs[i], b)
			continue
		}
		c.dispatch(pos, from, msgs[i], b, nil)
	}
}
