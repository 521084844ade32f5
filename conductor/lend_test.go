package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// lentLines returns a LineChannel and n lines it lent, each with its
// newline, all from one read: none has been reclaimed.
func lentLines(t *testing.T, n int) (*wire.LineChannel, [][]byte) {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"seq\":%d}\n", i)
	}
	lc := wire.NewLineChannel(strings.NewReader(in.String()), nopCloser{io.Discard}, 0)
	var lines [][]byte
	for range n {
		line, err := lc.Lend(func() {
			if len(lines) > 0 {
				t.Fatal("reclaim asked for with every line buffered")
			}
		})
		if err != nil || !lc.Lends(line) {
			t.Fatalf("line %d: err %v, lent %v", len(lines), err, lc.Lends(line))
		}
		lines = append(lines, lc.WithNewline(line))
	}
	return lc, lines
}

// recorder is an outbox's non-blocking writer that takes at most limit
// segments a write (all, if limit is 0) and keeps copies of them.
type recorder struct {
	limit int
	got   bytes.Buffer
}

func (r *recorder) try(segs [][]byte) ([][]byte, error) {
	n := len(segs)
	if r.limit > 0 {
		n = min(n, r.limit)
	}
	for _, s := range segs[:n] {
		r.got.Write(s)
	}
	return segs[n:], nil
}

// lentIn counts the segments of segs that lie in lc's buffer.
func lentIn(lc *wire.LineChannel, segs [][]byte) int {
	n := 0
	for _, s := range segs {
		if lc.Lends(s) {
			n++
		}
	}
	return n
}

// TestOutboxLent: lent lines an outbox still holds are copies wherever
// someone else may read them once their reader refills its buffer: after
// the reader's reclaim, in what the writer goroutine takes, and in what a
// write left unwritten. What is written is what was lent.
func TestOutboxLent(t *testing.T) {
	t.Run("held, then reclaimed", func(t *testing.T) {
		lc, lines := lentLines(t, 3)
		hb := &holdback{}
		o := newOutbox(hb, nil)
		r := &recorder{}
		o.attach(r.try)
		hb.hold() // a burst: put only queues
		for _, l := range lines {
			o.putFrom(lc, [][]byte{l})
		}
		if n := lentIn(lc, o.queue); n != 3 {
			t.Fatalf("%d of 3 queued lines lent before the reclaim", n)
		}
		o.reclaim(lc)
		if n := lentIn(lc, o.queue); n != 0 || len(o.lenders) != 0 {
			t.Fatalf("after the reclaim: %d lines lent, lenders %v", n, o.lenders)
		}
		hb.release()
		if want := string(bytes.Join(lines, nil)); r.got.String() != want {
			t.Errorf("wrote %q, want %q", r.got.String(), want)
		}
	})
	t.Run("taken by the writer", func(t *testing.T) {
		lc, lines := lentLines(t, 2)
		o := newOutbox(nil, nil) // no non-blocking writer: the writer goroutine's
		o.putFrom(lc, lines[:1])
		o.putFrom(lc, lines[1:])
		segs, _ := o.take(nil, nil)
		if len(segs) != 2 || lentIn(lc, segs) != 0 || !bytes.Equal(bytes.Join(segs, nil), bytes.Join(lines, nil)) {
			t.Errorf("took %q, %d of them lent", segs, lentIn(lc, segs))
		}
	})
	t.Run("left unwritten", func(t *testing.T) {
		lc, lines := lentLines(t, 3)
		hb := &holdback{}
		o := newOutbox(hb, nil)
		r := &recorder{limit: 1}
		o.attach(r.try)
		hb.hold()
		for _, l := range lines {
			o.putFrom(lc, [][]byte{l})
		}
		hb.release() // writes one; the writer gets the rest
		if r.got.String() != string(lines[0]) || len(o.queue) != 2 || lentIn(lc, o.queue) != 0 {
			t.Errorf("wrote %q; queued %q, %d lent", r.got.String(), o.queue, lentIn(lc, o.queue))
		}
	})
	t.Run("written at once", func(t *testing.T) {
		lc, lines := lentLines(t, 1)
		o := newOutbox(nil, nil)
		r := &recorder{}
		o.attach(r.try)
		o.putFrom(lc, lines)
		if r.got.String() != string(lines[0]) || len(o.queue) != 0 || len(o.lenders) != 0 {
			t.Errorf("wrote %q; queued %q, lenders %v", r.got.String(), o.queue, o.lenders)
		}
	})
}

// TestReclaimWaitsForWrite: a reader's reclaim waits while another
// goroutine's write of lent lines is under way, since the write reads
// them from the reader's buffer.
func TestReclaimWaitsForWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc, lines := lentLines(t, 1)
		o := newOutbox(nil, nil)
		release := make(chan struct{})
		o.attach(func(segs [][]byte) ([][]byte, error) {
			<-release // a write under way
			return nil, nil
		})
		go o.putFrom(lc, lines) // another reader's goroutine writes at once
		synctest.Wait()
		reclaimed := make(chan struct{})
		go func() {
			o.reclaim(lc)
			close(reclaimed)
		}()
		synctest.Wait()
		select {
		case <-reclaimed:
			t.Fatal("reclaimed while a write of the lent line was under way")
		default:
		}
		close(release)
		<-reclaimed
	})
}

// TestLentLinesStalledEditor: an agent streams while the editor, on real
// pipes, does not read, until the conductor has queued so much for it that
// it stops reading the agent; then the editor reads it all. Every update
// arrives as the agent wrote it, in order: the lines lent from the agent's
// read buffer were written from it, or copied before it was refilled.
func TestLentLinesStalledEditor(t *testing.T) {
	dir := t.TempDir()
	log, watch := watchLogs(t)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, Config{Agent: fake(t, dir, "agent", "streamer"), Logger: log}, inR, outW)
		outW.Close()
		inR.Close()
		done <- err
	}()
	ed := wire.NewLineChannel(outR, inW, 0)
	send := func(line string) {
		if err := ed.Send([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() []byte {
		line, err := ed.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	send(initLine)
	recv()
	send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	recv()
	const updates = 20000
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"tag":"p","updates":%d}}}`, updates))
	watch.wait(t, "paused reading") // the editor's queue is full
	for i := range updates {
		want := (&wire.Message{Method: "session/update", Params: json.RawMessage(fmt.Sprintf(
			`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"p#%d"}}}`, i))}).Bytes()
		if got := recv(); !bytes.Equal(got, want) {
			t.Fatalf("update %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if m, err := wire.Parse(recv()); err != nil || !m.IsResponse() {
		t.Fatalf("after the updates: %v, %v", m, err)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the conductor did not stop")
	}
	outR.Close()
}
