package conductor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
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
			o.putFrom(lc, [][]byte{l}, kindAnswer)
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
		o.putFrom(lc, lines[:1], kindAnswer)
		o.putFrom(lc, lines[1:], kindAnswer)
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
			o.putFrom(lc, [][]byte{l}, kindAnswer)
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
		o.putFrom(lc, lines, kindAnswer)
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
		go o.putFrom(lc, lines, kindAnswer) // another reader's goroutine writes at once
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
	log, watch := watchLogs(t)
	inW, outR, stop := runOnPipes(t, Config{Agent: fake(t, t.TempDir(), "agent", "streamer"), Logger: log})
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
		if got, want := recv(), streamedUpdate("s1", "p", i, 0).Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("update %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if m, err := wire.Parse(recv()); err != nil || !m.IsResponse() {
		t.Fatalf("after the updates: %v, %v", m, err)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// pacedReader reads at most a random number of bytes at a time, and now
// and then lets the conductor run ahead before it reads, so that what the
// conductor writes to the editor comes out in every kind of burst: written
// at once, queued, taken by the writer goroutine, left half written.
type pacedReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.rng.IntN(8) == 0 {
		time.Sleep(time.Duration(p.rng.IntN(300)) * time.Microsecond)
	}
	return p.r.Read(b[:min(len(b), 1+p.rng.IntN(80000))])
}

// TestLentLinesVariedSizes: an agent streams updates of every size, a few
// about as long as the conductor's read buffer, on either side of it, in
// two prompts, while the editor, on real pipes, reads in bursts of random
// sizes and pace, and sends requests of its own meanwhile. Every update
// arrives as the agent wrote it, in order, and every answer comes.
func TestLentLinesVariedSizes(t *testing.T) {
	inW, outR, stop := runOnPipes(t, Config{Agent: fake(t, t.TempDir(), "agent", "streamer")})
	ed := wire.NewLineChannel(&pacedReader{outR, rand.New(rand.NewPCG(1, 2))}, inW, 0)
	send := func(line string) {
		if err := ed.Send([]byte(line)); err != nil {
			t.Error(err)
		}
	}
	send(initLine)
	for i := range 2 {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"new%d","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, i))
	}
	type stream struct {
		session, tag string
		updates      int
		sizes        uint64
	}
	streams := []stream{{"s1", "a", 2000, 1}, {"s2", "b", 1000, 2}}
	prompted := make(chan struct{})
	go func() {
		defer close(prompted)
		for i, s := range streams {
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":{"sessionId":%q,"prompt":[],"_meta":{"tag":%q,"updates":%d,"sizes":%d}}}`,
				i, s.session, s.tag, s.updates, s.sizes))
		}
		for i := range 50 { // queued behind the prompts, answered after them
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"x%d","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, i))
		}
	}()

	next := make([]int, len(streams)) // each stream's next update
	answers := map[string]bool{}
	for len(answers) < 1+2+len(streams)+50 {
		line, err := ed.Recv()
		if err != nil {
			t.Fatalf("after %d answers and updates %v: %v", len(answers), next, err)
		}
		m, err := wire.Parse(line)
		if err != nil {
			t.Fatalf("unparsable line of %d bytes: %v", len(line), err)
		}
		if m.IsResponse() {
			if m.Error != nil {
				t.Fatalf("answer %s: %s", m.ID, m.Error)
			}
			for i, s := range streams {
				if string(m.ID) == fmt.Sprintf(`"p%d"`, i) && next[i] != s.updates {
					t.Fatalf("%s answered after %d of its %d updates", s.session, next[i], s.updates)
				}
			}
			answers[string(m.ID)] = true
			continue
		}
		i := slices.IndexFunc(streams, func(s stream) bool { return bytes.Contains(m.Params, []byte(`"sessionId":"`+s.session+`"`)) })
		if i < 0 {
			t.Fatalf("an update of no stream: %.200s", line)
		}
		s := streams[i]
		if want := streamedUpdate(s.session, s.tag, next[i], s.sizes).Bytes(); !bytes.Equal(line, want) {
			t.Fatalf("%s update %d: got %d bytes %.120q..., want %d bytes %.120q...", s.session, next[i], len(line), line, len(want), want)
		}
		next[i]++
	}
	for i, s := range streams {
		if next[i] != s.updates {
			t.Errorf("%s: %d updates before every answer, want %d", s.session, next[i], s.updates)
		}
	}
	<-prompted
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// runOnPipes runs the conductor on real pipes, as an editor starts it, and
// returns the editor's ends of them, and stop, which closes the editor's
// end of the conductor's input and returns Run's error once it has
// stopped.
func runOnPipes(t *testing.T, cfg Config) (in, out *os.File, stop func() error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that fails before stop
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, cfg, inR, outW)
		outW.Close()
		inR.Close()
		done <- err
	}()
	return inW, outR, func() error {
		defer outR.Close()
		inW.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("the conductor did not stop")
			return nil
		}
	}
}
