package conductor

import (
	"bytes"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A batch collects the responses to a JSON-RPC batch from the client, which
// go back as one array once every request in it has been answered (JSON-RPC
// 2.0, section 6). Its entries are relayed one by one like any message.
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

// receiveBatch relays each entry of a batch array. Entries that expect a
// response (requests, and entries that are not valid messages) are counted
// first, so that no early answer can complete the batch. A batch of only
// notifications gets no response; an empty one is itself invalid.
func (c *chain) receiveBatch(from *peer, line []byte) {
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
		if errs[i] != nil || msgs[i].IsRequest() {
			b.waiting++
		}
	}
	for i := range entries {
		if errs[i] != nil {
			c.badInput(from, 0, entries[i], errs[i], b)
			continue
		}
		c.dispatch(0, from, msgs[i], b, nil)
	}
}
