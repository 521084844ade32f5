package wire

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Spinning before a wait. When a message crosses the conductor, the process
// it goes to is woken by the kernel, and on the virtual machines editors and
// CI run on, waking a sleeping thread (an interrupt to an idle CPU, the
// scheduler, Go's poller and then its scheduler) costs more than the
// relay's own work. A reply often comes within tens of microseconds (a
// proxy passing a request on, a local agent answering), so a reader that
// finds its input empty first polls every input of the process that waits
// in a read, for a bounded time, without sleeping: a line that arrives
// meanwhile is read with no wake-up at all, neither of the conductor nor,
// since nothing sleeps on the pipe, by the writer's kernel call.
//
// It costs CPU: up to the bound per wait. So it is adaptive, as adaptive
// mutexes are: after a spin that found nothing, readers wait in the poller
// at once, until a wait ends within the bound again (an editor typing, an
// agent thinking for seconds, cost nothing). One reader spins at a time,
// and only in a process that runs Go code on one P (GOMAXPROCS=1): with a
// second P, its thread would wait in the poller meanwhile and be woken by
// every line, the spinner's own included. See EnableSpin. Where the CPUs
// are busy with other work, it buys nothing and costs CPU (bench/README.md):
// the setting that bounds it can turn it off. Closing an input whose
// reader spins waits for the spin to end, the bound at most.
type spinner struct {
	limit int64 // nanoseconds

	spinning atomic.Bool   // a reader is spinning
	useful   atomic.Bool   // the last wait ended within limit
	parks    atomic.Uint64 // waits begun in the poller, so that a spin polls those too

	mu      sync.Mutex
	readers []*nonblockReader // readers that may wait, with their descriptors
}

// spin is the process's spinner, or nil: set once by EnableSpin, before any
// reader exists.
var spin *spinner

// EnableSpin makes the readers of pipes and sockets that wire opens from
// now on spin for up to limit before each wait (see spinner), and reports
// whether it did: not where the relay's raw reads are off, and not while
// Go code runs on more than one P. It must be called once, before the
// first LineChannel is made.
func EnableSpin(limit time.Duration) bool {
	if !rawIO || limit <= 0 || runtime.GOMAXPROCS(0) != 1 {
		return false
	}
	s := &spinner{limit: int64(limit)}
	s.useful.Store(true)
	spin = s
	return true
}

// add and remove keep the spinner's list of readers.
func (s *spinner) add(r *nonblockReader) {
	s.mu.Lock()
	s.readers = append(s.readers, r)
	s.mu.Unlock()
}

func (s *spinner) remove(r *nonblockReader) {
	s.mu.Lock()
	if i := slices.Index(s.readers, r); i >= 0 {
		s.readers = slices.Delete(s.readers, i, i+1) // clears the freed slot
	}
	s.mu.Unlock()
}

// pollSet appends to fds the descriptor of self, then those of the other
// readers now waiting in the poller.
func (s *spinner) pollSet(fds []unix.PollFd, self *nonblockReader) []unix.PollFd {
	fds = append(fds[:0], unix.PollFd{Fd: self.fd, Events: unix.POLLIN})
	s.mu.Lock()
	for _, r := range s.readers {
		if r != self && r.waiting.Load() {
			fds = append(fds, unix.PollFd{Fd: r.fd, Events: unix.POLLIN})
		}
	}
	s.mu.Unlock()
	return fds
}

// wait reads into r.p from fd, which has just been found empty, spinning if
// that is worth it. It reports whether it read (r.n and r.rerr are then
// set): if not, the reader must wait in the poller, because time is up or
// another reader's input is ready (which only the poller can hand over).
func (s *spinner) wait(r *nonblockReader, fd int) bool {
	if !s.useful.Load() || !s.spinning.CompareAndSwap(false, true) {
		return false
	}
	defer s.spinning.Store(false)
	parks := s.parks.Load()
	r.fds = s.pollSet(r.fds, r)
	var zero unix.Timespec
	deadline := time.Now().UnixNano() + s.limit
	for {
		// On one P, the conductor's other goroutines run only when this one
		// lets them.
		runtime.Gosched()
		if p := s.parks.Load(); p != parks {
			// Another reader began to wait while this one let it run.
			parks = p
			r.fds = s.pollSet(r.fds, r)
		}
		for i := range r.fds {
			r.fds[i].Revents = 0
		}
		n, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&r.fds[0])), uintptr(len(r.fds)),
			uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		switch {
		case e != 0 && e != syscall.EINTR:
			return false
		case n > 0 && r.fds[0].Revents == 0:
			return false // another input: the poller hands it over without sleeping
		case n > 0:
			r.n, r.rerr = readNonblock(fd, r.p)
			if !errors.Is(r.rerr, syscall.EAGAIN) && !errors.Is(r.rerr, syscall.EINTR) {
				return true
			}
		}
		if time.Now().UnixNano() >= deadline {
			s.useful.Store(false)
			return false
		}
	}
}

// parked notes that r is about to wait in the poller.
func (s *spinner) parked(r *nonblockReader) {
	r.waitFrom = time.Now().UnixNano()
	r.waiting.Store(true)
	s.parks.Add(1)
}

// woken notes that r's wait in the poller has ended: one short enough makes
// spinning worth trying again.
func (s *spinner) woken(r *nonblockReader) {
	r.waiting.Store(false)
	if !s.useful.Load() && time.Now().UnixNano()-r.waitFrom < s.limit {
		s.useful.Store(true)
	}
}
