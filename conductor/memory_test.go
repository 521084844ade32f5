package conductor

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"weak"
)

// TestRelayLetsGoOfTheLine: once a request has been written on, nothing
// the conductor keeps while it waits for the answer (the call, its id)
// may hold on to the line it came in. Before, the call's copy of the
// caller's id was a slice of that line, and a 16 MiB prompt stayed
// resident at every hop until its answer.
func TestRelayLetsGoOfTheLine(t *testing.T) {
	for _, size := range []int{200, 2 << 20} {
		prompt := `{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"` +
			strings.Repeat("x", size) + `"}]}}`
		c, outs := benchChain(0, map[int]string{0: prompt})
		client, agent := c.peers[0], c.peers[1]
		line, err := client.link.Load().ch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		kept := weak.Make(&line[0])
		c.receive(client, line, new(reader))
		line = nil
		var spare [][]byte
		flush(t, agent, &spare)
		if outs[1].lines != 1 {
			t.Fatalf("%d bytes: the agent got %d lines, want the prompt", size, outs[1].lines)
		}
		if client.inFlight([]byte(`"p-1"`)) == nil {
			t.Fatalf("%d bytes: the prompt is not in flight", size)
		}
		runtime.GC()
		if kept.Value() != nil {
			t.Errorf("%d bytes: the prompt's line is still reachable while its answer is awaited", size)
		}
		runtime.KeepAlive(c) // the chain, and the call in it, stay reachable

	}
}

// TestLargeWritesCollect: once enough large lines have gone out, through
// a direct write or the writer, the memory they held is given back at once,
// rather than when the heap next grows. The test turns the collector's own
// pacing off, so that only the conductor's collections free anything, and
// checks what is left on the heap: less than collectAfter of the 16 MiB
// written.
func TestLargeWritesCollect(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	l, sc, writerDone := pipeLinkDone(t, nil)
	sc.Buffer(make([]byte, 0, 4<<20), 4<<20) // allocated before the baseline
	const lines, size = 8, collectAfter / 2
	drained := make(chan int)
	go func() {
		n := 0
		for range lines {
			if sc.Scan() {
				n++
			}
		}
		drained <- n
	}()
	largeWritten.Store(0)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for range lines { // direct writes, and the writer for what the pipe does not take
		line := make([]byte, size+1)
		copy(line, bytes.Repeat([]byte("x"), 1<<10))
		line[size] = '\n'
		l.out.put(line)
	}
	if n := <-drained; n != lines {
		t.Fatalf("read %d lines, want %d (%v)", n, lines, sc.Err())
	}
	l.out.close() // every write has returned once the writer has ended
	<-writerDone
	var after runtime.MemStats
	runtime.ReadMemStats(&after) // no collection of its own
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew >= collectAfter {
		t.Errorf("%d MiB of large lines written; the heap holds %.1f MiB more than before, want less than %d MiB",
			lines*size>>20, float64(grew)/(1<<20), collectAfter>>20)
	}
}
