package trace

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestHubHistoryBound feeds a hub events of one size, from one byte up,
// until its history has been forgotten and refilled twice over. The heap
// it keeps alive, as measured, stays within its bound (and an eighth, for
// the measure); so do the events it keeps, each costing its copy as the
// allocator rounded it and a slot in the history, and what it
// counts covers them; and it still keeps most of what the bound allows.
func TestHubHistoryBound(t *testing.T) {
	const bound = 1 << 20
	for _, size := range []int{1, 20, 100, 3000} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			line := []byte(strings.Repeat("x", size))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			h := NewHub(bound)
			for range 3*bound/(size+24) + 100 { // three times what it keeps
				h.publish(line)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)

			events, _ := h.Snapshot()
			cost := len(events) * int(unsafe.Sizeof(line))
			for _, e := range events {
				cost += max(cap(e), 16) // 16: a tiny allocation under -race
			}
			h.mu.Lock()
			counted := h.size
			h.mu.Unlock()
			t.Logf("%d events kept, costing %d bytes; %d bytes counted, %d bytes of heap held", len(events), cost, counted, heap)
			if limit := int64(bound + bound/8); heap > limit {
				t.Errorf("the hub holds %d bytes of heap, more than its bound %d (+1/8)", heap, bound)
			}
			if cost > bound || counted < cost || counted > bound {
				t.Errorf("the events kept cost %d bytes, the hub counts %d, its bound is %d", cost, counted, bound)
			}
			if cost < bound/2 {
				t.Errorf("the events kept cost %d bytes, not even half the bound %d", cost, bound)
			}
		})
	}
}

// TestHubRing: what a hub keeps, and what a subscriber gets, are the
// latest events in order, with their sequence numbers, while its history
// grows, wraps, and shrinks when a large event takes the place of many
// small ones.
func TestHubRing(t *testing.T) {
	h := NewHub(8 << 10)
	next := 0
	publish := func(n, size int) {
		for range n {
			h.publish(fmt.Appendf(nil, "%-*d", size, next))
			next++
		}
	}
	check := func(what string) (kept int) {
		t.Helper()
		events, end := h.Snapshot()
		if end != next || len(events) == 0 {
			t.Fatalf("%s: %d events up to %d, want some up to %d", what, len(events), end, next)
		}
		for i, e := range events {
			if got, _ := strconv.Atoi(strings.TrimSpace(string(e))); got != end-len(events)+i {
				t.Fatalf("%s: event %d of the snapshot is %q, want %d", what, i, e, end-len(events)+i)
			}
		}
		from := end - len(events)/2
		ch, first, stop := h.Subscribe(from, 0)
		defer stop()
		if first != from || len(ch) != end-from {
			t.Fatalf("%s: Subscribe(%d) starts at %d with %d events, want %d", what, from, first, len(ch), end-from)
		}
		for i := from; i < end; i++ {
			if e := <-ch; strings.TrimSpace(string(e)) != strconv.Itoa(i) {
				t.Fatalf("%s: subscriber got %q, want %d", what, e, i)
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.size > h.maxBytes && len(events) > 1 {
			t.Fatalf("%s: counts %d bytes for %d events, bound %d", what, h.size, len(events), h.maxBytes)
		}
		return len(events)
	}
	publish(10, 8)
	check("a few")
	publish(1000, 8)
	check("wrapped")
	publish(1, 6<<10)
	check("a large one")
	publish(1, 16<<10)
	if n := check("one larger than the bound"); n != 1 {
		t.Errorf("%d events kept, want the one larger than the bound", n)
	}
	publish(300, 8)
	check("small ones again")
}

// TestHubStalledSubscriberBound: a subscriber that stops reading (a live
// viewer's tab that does not read its stream) falls behind the history
// long before it fills its buffer of 4096 events, as the server asks, when
// events are large. What it has not taken must not outlive the history:
// the heap held stays within the hub's bound, and the subscriber is let go,
// to catch up from the history when it comes back.
func TestHubStalledSubscriberBound(t *testing.T) {
	const bound, size = 1 << 20, 3000
	line := []byte(strings.Repeat("x", size))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := NewHub(bound)
	ch, _, stop := h.Subscribe(0, 4096)
	defer stop()
	for range 3 * bound / size { // three times what the history keeps, a fraction of 4096
		h.publish(line)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bytes of heap held, %d events queued for the subscriber", heap, len(ch))
	if limit := int64(bound + bound/8); heap > limit {
		t.Errorf("the hub and its stalled subscriber hold %d bytes of heap, more than its bound %d (+1/8)", heap, bound)
	}
	if events, _ := h.Snapshot(); len(ch) > len(events) {
		t.Errorf("the stalled subscriber still has %d events queued, more than the %d of the history", len(ch), len(events))
	}
	runtime.KeepAlive(ch)
}
