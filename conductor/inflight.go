package conductor

import (
	"bytes"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A callList holds the requests one peer has in flight, oldest first,
// linked through the calls themselves (call.prev, call.next). A request
// costs one link and one unlink: no hashing of the caller's id and no
// allocation, where a map keyed by that id cost both on every request.
// Looking a request up by its id, which only a cancel does, walks the list.
// The owning peer's mu guards it.
type callList struct {
	head, tail *call
	n          int
}

// push adds c, the newest request.
func (l *callList) push(c *call) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

// remove takes c out of the list, and reports whether it was in it.
func (l *callList) remove(c *call) bool {
	if c.prev == nil && l.head != c {
		return false
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
	l.n--
	return true
}

// replace puts c in old's place, and reports whether old was in the list.
func (l *callList) replace(old, c *call) bool {
	if old.prev == nil && l.head != old {
		return false
	}
	c.prev, c.next = old.prev, old.next
	if c.prev != nil {
		c.prev.next = c
	} else {
		l.head = c
	}
	if c.next != nil {
		c.next.prev = c
	} else {
		l.tail = c
	}
	old.prev, old.next = nil, nil
	return true
}

// find returns the newest request made under id, or nil. A client that
// reuses an id while the first request is open gets the later one, as a
// cancel for it would mean. An id spelled otherwise is the same id (1.0 or
// 1e0 for 1, "\u0061" for "a"), as the TypeScript SDK reads a cancel; that
// is rare, and looked for only when no request has the very bytes, which
// also keeps apart ids a double cannot tell apart. The cancel's id is read
// once for that second walk, not once for each request in flight: a
// cancel that comes after its answer, which finds nothing, walks it all.
func (l *callList) find(id []byte) *call {
	for c := l.tail; c != nil; c = c.prev {
		if bytes.Equal(c.fromID, id) {
			return c
		}
	}
	want := wire.ReadID(id)
	for c := l.tail; c != nil; c = c.prev {
		if want.Same(c.fromID) {
			return c
		}
	}
	return nil
}
