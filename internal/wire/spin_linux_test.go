package wire

import (
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
	"time"
)

// spinPipe is a pipe whose reading end is read through s, as the relay
// reads its inputs once EnableSpin has made s.
func spinPipe(t *testing.T, s *spinner) (*nonblockReader, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	nr, ok := nonblockingWith(r, s).(*nonblockReader)
	if !ok {
		t.Skip("raw reads are off")
	}
	return nr, w
}

func newSpinner(limit time.Duration) *spinner {
	s := &spinner{limit: int64(limit)}
	s.useful.Store(true)
	return s
}

// until waits for cond, which the goroutine under test makes true,
// failing the test after 10 seconds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); runtime.Gosched() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

type readResult struct {
	s   string
	err error
}

func readOnce(r io.Reader) <-chan readResult {
	c := make(chan readResult, 1)
	go func() {
		p := make([]byte, 64)
		n, err := r.Read(p)
		c <- readResult{string(p[:n]), err}
	}()
	return c
}

// A line that comes while its reader spins is read without waiting in the
// poller.
func TestSpinReadsWhatComes(t *testing.T) {
	oneP(t)
	s := newSpinner(time.Minute)
	a, w := spinPipe(t, s)
	got := readOnce(a)
	until(t, "the reader spins", s.spinning.Load)
	if _, err := w.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.s != "x\n" {
		t.Fatalf("read %q, %v; want %q", r.s, r.err, "x\n")
	}
	if a.waitFrom != 0 || s.spinning.Load() || !s.useful.Load() {
		t.Errorf("after a line came while spinning: waited in the poller %v, still spinning %v, spinning useful %v; want false, false, true",
			a.waitFrom != 0, s.spinning.Load(), s.useful.Load())
	}
}

// A line for another reader, which waits in the poller, ends the spin at
// once (only the poller can hand it over, and does without sleeping), and
// that reader gets it.
func TestSpinYieldsToAnotherInput(t *testing.T) {
	oneP(t)
	s := newSpinner(time.Minute)
	a, wa := spinPipe(t, s)
	b, wb := spinPipe(t, s)
	gotA := readOnce(a)
	until(t, "a spins", s.spinning.Load)
	// b finds its pipe empty while a spins: one spinner at a time, so it
	// waits in the poller.
	gotB := readOnce(b)
	until(t, "b waits in the poller", b.waiting.Load)
	if _, err := wb.Write([]byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-gotB; r.err != nil || r.s != "b\n" {
		t.Fatalf("b read %q, %v", r.s, r.err)
	}
	until(t, "a waits in the poller", a.waiting.Load)
	if !s.useful.Load() {
		t.Error("a spin ended by another input counted as one that found nothing")
	}
	if _, err := wa.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-gotA; r.err != nil || r.s != "a\n" {
		t.Fatalf("a read %q, %v", r.s, r.err)
	}
}

// oneP runs the test's Go code on one P, as EnableSpin requires, so that
// no thread waits in the poller while a reader spins.
func oneP(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// A spin that finds nothing within its bound ends in the poller, and turns
// spinning off until a wait in the poller ends within the bound.
func TestSpinAdapts(t *testing.T) {
	oneP(t)
	s := newSpinner(time.Millisecond)
	a, w := spinPipe(t, s)
	got := readOnce(a)
	until(t, "the spin gives up", func() bool { return a.waiting.Load() })
	if s.useful.Load() {
		t.Fatal("spinning still counted useful after a spin that found nothing")
	}
	if _, err := w.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || r.s != "late\n" {
		t.Fatalf("read %q, %v", r.s, r.err)
	}
	for _, c := range []struct {
		waited time.Duration
		want   bool
	}{{time.Hour, false}, {2 * time.Millisecond, false}, {0, true}} {
		s.useful.Store(false)
		a.waitFrom = time.Now().Add(-c.waited).UnixNano()
		a.waiting.Store(true)
		s.woken(a)
		if s.useful.Load() != c.want || a.waiting.Load() {
			t.Errorf("after a wait of %v: spinning useful %v, reader waiting %v; want %v, false", c.waited, s.useful.Load(), a.waiting.Load(), c.want)
		}
	}
}

// Closing an input while its reader spins ends the read (after the spin's
// bound at most), and the reader leaves the spinner's list.
func TestSpinClose(t *testing.T) {
	oneP(t)
	s := newSpinner(10 * time.Millisecond)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a, ok := nonblockingWith(r, s).(*nonblockReader)
	if !ok {
		t.Skip("raw reads are off")
	}
	got := readOnce(a)
	until(t, "the reader spins", s.spinning.Load)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if res := <-got; !errors.Is(res.err, os.ErrClosed) {
		t.Fatalf("read after close: %q, %v; want os.ErrClosed", res.s, res.err)
	}
	if n := listed(s); n != 0 {
		t.Errorf("%d readers left in the spinner's list after their input closed", n)
	}
}

// EOF, too, takes the reader off the list.
func TestSpinEOF(t *testing.T) {
	oneP(t)
	s := newSpinner(time.Minute)
	a, w := spinPipe(t, s)
	got := readOnce(a)
	until(t, "the reader spins", s.spinning.Load)
	w.Close()
	if r := <-got; r.err != io.EOF {
		t.Fatalf("read at EOF: %q, %v; want io.EOF", r.s, r.err)
	}
	if n := listed(s); n != 0 {
		t.Errorf("%d readers left in the spinner's list at EOF", n)
	}
}

// listed returns how many readers s polls for.
func listed(s *spinner) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.readers)
}

// EnableSpin refuses where its spinner would be woken by a second P.
func TestEnableSpin(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	defer func() { spin = nil }()
	if EnableSpin(time.Millisecond) || spin != nil {
		t.Fatal("spinning enabled with two Ps")
	}
	runtime.GOMAXPROCS(1)
	if !EnableSpin(time.Millisecond) || spin == nil {
		t.Fatal("spinning not enabled with one P")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if nr, ok := nonblocking(r).(*nonblockReader); !ok || nr.spin != spin {
		t.Fatal("a pipe read after EnableSpin does not spin")
	}
}
