package testio

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent writes from many goroutines while reading, which
// the race detector would flag were the buffer not guarded, and checks
// that every write is kept whole.
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = b.String()
		}
	})
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "line ") || len(l) != len("line 0") {
			t.Fatalf("a write was split: %q", l)
		}
	}
	if got := fmt.Sprintf("%s", &b); got != b.String() {
		t.Errorf("%%s printed %q, want what String returns", got)
	}
}
