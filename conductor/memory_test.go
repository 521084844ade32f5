package conductor

import (
	"runtime"
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
		c.receive(client, line)
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
// a direct write or the writer, the memory they held is collected, rather
// than when the heap next grows.
func TestLargeWritesCollect(t *testing.T) {
	l, sc, writerDone := pipeLinkDone(t, nil)
	sc.Buffer(nil, 4<<20)
	line := []byte(strings.Repeat("x", collectAfter/2) + "\n")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	drained := make(chan int)
	go func() {
		n := 0
		for range 4 {
			if sc.Scan() {
				n++
			}
		}
		drained <- n
	}()
	for range 4 { // direct writes, and the writer for what the pipe does not take
		l.out.put(line)
	}
	if n := <-drained; n != 4 {
		t.Fatalf("read %d lines, want 4 (%v)", n, sc.Err())
	}
	l.out.close() // every write has returned once the writer has ended
	<-writerDone
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumForcedGC == before.NumForcedGC {
		t.Errorf("%d MiB of large lines written, no collection", 4*len(line)>>20)
	}
}
