package conductor

import (
	"sync"
	"time"
)

// A tally counts what a peer keeps doing that is logged in full only the
// first few times: lines of stray output, messages dropped for it once
// closed. The rest are counted, so that a flood cannot flood the log; and
// so that they still show while the chain runs, not only at its end, the
// count is logged as more come, at most once per tallyEvery.
type tally struct {
	mu       sync.Mutex
	n        int64            // how many so far
	reported int64            // n as last logged, in full or as a count
	next     time.Time        // no count is logged before then
	now      func() time.Time // nil: time.Now; tests set it
}

// tallyEvery is the least time between two counts a tally logs while
// the chain runs.
const tallyEvery = 30 * time.Second

// add counts one more, and says how to log it: as it is, when it is one
// of the first few; as the count n, when that is due; or not at all.
func (t *tally) add(few int64) (n int64, whole, count bool) {
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
	t.next = now.Add(tallyEvery)
	return n, whole, count
}

// unreported returns how many there are in all, and whether some of
// them have not been logged yet, in full or in a count.
func (t *tally) unreported() (n int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.n > t.reported
}

func (t *tally) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}
