// Package tally bounds the logging of what a peer may do without end: the
// first few in full, then a count now and then, and a total at the end.
// The conductor and the proxy library share it.
package tally

import (
	"sync"
	"time"
)

// A Counter counts what a peer keeps doing that is logged in full only the
// first few times: lines of stray output, messages dropped for it once
// closed. The rest are counted, so that a flood cannot flood the log; and
// so that they still show while the chain runs, not only at its end, the
// count is logged as more come, at most once per Every. Its zero value is
// ready to use.
type Counter struct {
	mu       sync.Mutex
	n        int64     // how many so far
	reported int64     // n as last logged, in full or as a count
	next     time.Time // no count is logged before then
	// Now is the clock; nil is time.Now. Tests set it.
	Now func() time.Time
}

// Every is the least time between two counts a Counter has logged while
// the chain runs.
const Every = 30 * time.Second

// Add counts one more, and says how to log it: as it is, when it is one
// of the first few; as the count n, when that is due; or not at all.
func (t *Counter) Add(few int64) (n int64, whole, count bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	n = t.n
	now := t.clock()
	switch {
	case n <= few:
		whole = true
	case now.Before(t.next):
		return n, false, false
	default:
		count = true
	}
	t.reported = n
	t.next = now.Add(Every)
	return n, whole, count
}

// Unreported returns how many there are in all, and whether some of
// them have not been logged yet, in full or in a count.
func (t *Counter) Unreported() (n int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.n > t.reported
}

func (t *Counter) clock() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}
