package wire

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestTryWriterAllocations: a burst, longer than the iovecs writev keeps
// on the stack, is written without allocating once the channel has
// written one as long, and arrives whole and in order.
func TestTryWriterAllocations(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	write := NewLineChannel(r, w, 0).TryWriter()
	if write == nil {
		t.Fatal("no TryWriter for a pipe")
	}
	burst := make([][]byte, 100)
	var want strings.Builder
	for i := range burst {
		burst[i] = []byte("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}\n")
		want.Write(burst[i])
	}
	got := make([]byte, want.Len())
	segs := make([][]byte, len(burst))
	n := testing.AllocsPerRun(50, func() {
		copy(segs, burst)
		if rest, err := write(segs); err != nil || len(rest) > 0 {
			t.Fatalf("write: %d segments left, %v", len(rest), err)
		}
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatal(err)
		}
	})
	if string(got) != want.String() {
		t.Errorf("read %q, want %q", got, want.String())
	}
	if n != 0 {
		t.Errorf("a burst of %d lines allocates %v times, want 0", len(burst), n)
	}
}
