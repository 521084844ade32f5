package proxy

import (
	"context"
	"slices"
	"testing"
)

// A line of a free holder's goes after the lines free to go and ahead of
// every place, and so of the lines queued behind one; lines of no holder
// go last, and a handler's in its place.
func TestOutboxFreeLine(t *testing.T) {
	o := newOutbox()
	first, second, free := new(holder), new(holder), &holder{free: true}
	o.hold(first)
	o.hold(second)
	o.put(nil, []byte("relayed\n"))
	o.put(second, []byte("second's\n"))
	o.put(free, []byte("free 1\n"))
	o.put(first, []byte("first's\n"))
	o.put(free, []byte("free 2\n"))
	o.putWaiting(free, []byte("free call\n"), true)
	var got []string
	take := func() {
		lines, _ := o.take(context.Background(), nil)
		for _, l := range lines {
			got = append(got, string(l))
		}
		o.busy = false // as the writer does once it has written them
	}
	take()
	o.release(first)
	take()
	o.release(second)
	take()
	want := []string{"free 1\n", "first's\n", "free 2\n", "free call\n", "second's\n", "relayed\n"}
	if !slices.Equal(got, want) {
		t.Errorf("lines went out as %q, want %q", got, want)
	}
}
