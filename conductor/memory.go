package conductor

import (
	"runtime"
	"sync/atomic"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// Large messages are given back to the runtime as soon as they are written.
// A relayed line is garbage the moment its last byte is out, but the
// collector only runs once the heap has grown, after the next large line
// has been allocated; and each hop's line is a little longer than the last
// (it gains an envelope or an id), so it never fits the space the previous
// one left. A large prompt through a chain thus stayed resident once per
// hop. Collecting once enough large bytes have gone out keeps about one
// copy (TestLargeWritesCollect; make bench reports the peak RSS).
const (
	largeLine    = 1 << 20 // a segment from this size counts
	collectAfter = 4 << 20 // large bytes written between collections
)

var (
	largeWritten atomic.Int64
	collect      = trick.On(trick.Collect)
)

// largeBytes is how much of segs counts as large.
func largeBytes(segs [][]byte) int {
	n := 0
	for _, s := range segs {
		if len(s) >= largeLine {
			n += len(s)
		}
	}
	return n
}

// wroteLarge records n large bytes written, with no reference to them
// left, and collects when enough have gone.
func wroteLarge(n int) {
	if n == 0 || !collect || largeWritten.Add(int64(n)) < collectAfter {
		return
	}
	largeWritten.Store(0)
	runtime.GC()
}
