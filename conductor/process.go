//go:build unix

package conductor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/supervisor"
)

// A process is one running component. It lives in its own process group so
// that stopping it also stops whatever it started (npx, uvx and shell
// wrappers leave the real program as a grandchild).
//
// Its pipes are plain os.Pipes rather than exec's StdoutPipe, whose Wait
// closes the reading end: a component's last messages must be read to EOF
// however its exit and our reaping interleave.
type process struct {
	name      string
	pid       int
	reap      func() error      // waits for its end: nil, or how it ended
	watch     *supervisor.Watch // the chain's watchdog, or nil
	component string            // its marker, for watch.Sweep (see link.stop)
	stdin     *os.File
	stdout    *os.File
	errOut    *os.File

	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // valid after exited is closed
	eof     chan struct{} // closed when its stdout has been read to its end
	stderr  *tail
	drained chan struct{} // closed when stderr has been read to its end
	// killed is set once stop, for a replaced process, sent SIGKILL of
	// its own (see stopAll).
	killed atomic.Bool
}

// startProcess starts c with piped stdio, in a process group of its own
// that the kernel kills should the conductor die outright (SIGKILL). With
// w, the chain's watchdog, c carries the chain's marker in its environment
// and w learns of its group. The caller runs wait and pumpStderr, and reads
// stdout.
func startProcess(c Component, w *supervisor.Watch) (p *process, err error) {
	// The component's own variables replace the conductor's: a program
	// given a name twice sees the first (Go, glibc, Node).
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		_, own := c.Env[name]
		return own
	})
	for k, v := range c.Env {
		env = append(env, k+"="+v)
	}
	var component string
	if w != nil {
		env, component = w.Env(env)
	}

	var theirs []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close() // the child holds its own copies
		}
	}()
	pipe := func() (r, w *os.File) {
		if err == nil {
			r, w, err = os.Pipe()
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	theirs = append(theirs, inR, outW, errW)
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, err
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = c.Dir, env, sysProcAttr()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err = supervisor.Start(cmd); err != nil {
		closeAll(inW, outR, errR)
		return nil, err
	}
	if w != nil {
		w.Started(cmd.Process.Pid)
	}
	return &process{
		name: c.Name, pid: cmd.Process.Pid, reap: func() error { return supervisor.Wait(cmd) }, watch: w, component: component,
		stdin: inW, stdout: outR, errOut: errR,
		exited:  make(chan struct{}),
		eof:     make(chan struct{}),
		stderr:  newTail(20),
		drained: make(chan struct{}),
	}, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// wait reaps the process. Once the leader is gone, anything it left in its
// group is killed, so that its pipes reach EOF.
func (p *process) wait() {
	p.waitErr = p.reap()
	close(p.exited)
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	if p.watch != nil {
		p.watch.Ended(p.pid)
	}
}

// outputEnded returns once the output of a component whose process has
// exited has been read to its end, ending it itself where only what the
// process started outside its group (setsid) holds it open: once nothing
// is left unread there, the output can carry nothing more of the
// component's, and without its end the conductor would never hear that
// the component is gone. Where the pipe cannot tell what it holds, the
// output ends when its last holder exits, as before.
func (l *link) outputEnded() {
	tick := time.NewTicker(outputBound)
	defer tick.Stop()
	for {
		select {
		case <-l.readDone:
			return
		case <-tick.C:
		}
		n, ok := unread(l.proc.stdout)
		if !ok {
			return
		}
		if n == 0 {
			l.proc.closeOutputs()
			return
		}
	}
}

// maxStderrLine is as much of one line of a component's stderr as is
// logged and kept: a longer one (a dump of a whole file, say) is cut short.
const maxStderrLine = 1 << 20

// pumpStderr logs the component's stderr line by line and keeps the last
// lines for error reports. It reads to the end, so that the component never
// blocks on a full stderr pipe: a line longer than maxStderrLine is logged
// cut short, with a warning that says how long it was, and the lines after
// it are logged as ever.
func (p *process) pumpStderr(log *zap.Logger) {
	defer close(p.drained)
	defer p.errOut.Close()
	eachLine(p.errOut, maxStderrLine, func(b []byte, n int) {
		line := stripTerminal(string(b))
		if n > len(b) {
			p.stderr.add(line + " [cut short: " + strconv.Itoa(n) + " bytes in all]")
			log.Warn("stderr line too long: logged cut short", zap.String("stream", "stderr"),
				zap.Int("bytes", n), zap.Int("limit", maxStderrLine), zap.String("line", line))
			return
		}
		p.stderr.add(line)
		level, text, ok := logLevel(line)
		if !ok {
			level, text = zap.InfoLevel, line
		}
		if ce := log.Check(level, text); ce != nil {
			ce.Write(zap.String("stream", "stderr"))
		}
	})
}

// eachLine calls fn with each line read from r, without its newline (LF or
// CR LF), and its length: a line longer than max is read past in pieces,
// never held whole, and fn gets its first max bytes. A last line without a
// newline counts. It returns at the end of r, or when reading fails.
func eachLine(r io.Reader, max int, fn func(line []byte, n int)) {
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	n := 0
	var last byte // of the line so far
	for {
		frag, err := br.ReadSlice('\n')
		ended := err == nil
		if ended {
			frag = frag[:len(frag)-1]
		}
		if len(frag) > 0 {
			last = frag[len(frag)-1]
		}
		n += len(frag)
		line = append(line, frag[:min(len(frag), max-len(line))]...)
		if ended && n > 0 && last == '\r' {
			n--
			line = line[:min(len(line), n)] // a cut line never kept its CR
		}
		if ended || err != bufio.ErrBufferFull && n > 0 {
			fn(line, n)
			line, n, last = line[:0], 0, 0
			if cap(line) > 64<<10 {
				line = nil // one long line need not hold its buffer for good
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// Bounds on the last steps of stopping a process, after its grace period:
// how long SIGTERM has before SIGKILL, how long SIGKILL has to be seen to
// work, and how long a component's output may stay open once its process
// is gone (a grandchild outside its group may hold it). Shutdown takes at
// most the grace period plus their sum.
const (
	termBound   = 500 * time.Millisecond
	killBound   = 200 * time.Millisecond
	outputBound = 100 * time.Millisecond
)

// stop ends the process and its group once its stdin has been closed (by
// its peer's writer, after flushing what was queued): wait up to grace for
// it to exit on its own, then SIGTERM the group, then SIGKILL it, saying
// so in log, and noting the last in killed. Once cut is closed, before
// either signal, the shutdown signals it with the components (stopAll),
// and names it in its outcome: stop then only waits for its end, as long
// as those signals take, so that no SIGKILL of its own lands inside the
// shutdown's SIGTERM window, which would say SIGTERM ended it. It returns
// once the process has been reaped, or after the bounds above if not even
// SIGKILL could end it (wait must be running).
func (p *process) stop(grace time.Duration, cut <-chan struct{}, log *zap.Logger) {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	leave := func() { // to the shutdown's signals
		timer.Reset(termBound + killBound)
		select {
		case <-p.exited:
		case <-timer.C:
		}
	}
	select {
	case <-p.exited:
		return
	case <-timer.C:
	case <-cut:
		leave()
		return
	}
	log.Warn("replaced process did not exit within the grace period after its input closed: SIGTERM to its process group",
		zap.String("component", p.name), zap.Int("pid", p.pid), zap.Duration("grace", grace))
	p.signal(syscall.SIGTERM)
	timer.Reset(termBound)
	select {
	case <-p.exited:
		return
	case <-timer.C:
	case <-cut:
		timer.Stop()
		leave()
		return
	}
	log.Warn("replaced process did not exit on SIGTERM: SIGKILL to its process group",
		zap.String("component", p.name), zap.Int("pid", p.pid), zap.Duration("after", termBound))
	p.killed.Store(true)
	p.signal(syscall.SIGKILL)
	timer.Reset(killBound)
	select {
	case <-p.exited:
	case <-timer.C:
	}
}

// signal sends sig to the process's group.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}

// hasExited reports whether the process has been reaped.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// closeOutputs closes the conductor's ends of the process's stdout and
// stderr, so that their readers end even while something the component
// left behind still holds the other ends.
func (p *process) closeOutputs() {
	p.stdout.Close()
	p.errOut.Close()
}

// stop closes a component's input and stops its process, as process.stop
// does, kills what it started outside its group (see Watch.Sweep), and
// returns once its outputs have been read to the end. It ends the link of
// a component that failed mid-session, to be restarted or bypassed (see
// retire).
func (l *link) stop(grace time.Duration, cut <-chan struct{}, log *zap.Logger) {
	l.out.close()
	l.proc.stop(grace, cut, log)
	if l.proc.watch != nil {
		l.proc.watch.Sweep(l.proc.component)
	}
	ctx, cancel := context.WithTimeout(context.Background(), outputBound)
	defer cancel()
	l.endOutputs(ctx)
}

// endOutputs waits until a component's stdout and stderr have been read to
// the end, or until ctx is done: then the conductor's ends are closed, so
// that their readers end even though something the component left behind
// still holds the pipes.
func (l *link) endOutputs(ctx context.Context) {
	for _, c := range []chan struct{}{l.readDone, l.proc.drained} {
		select {
		case <-c:
		case <-ctx.Done():
			l.proc.closeOutputs()
		}
	}
	<-l.readDone
	<-l.proc.drained
}

// kill ends a process whose wait is not running, for a chain that never
// got going.
func (p *process) kill() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.reap()
	if p.watch != nil {
		p.watch.Ended(p.pid)
	}
	closeAll(p.stdin, p.stdout, p.errOut)
}

// exitError describes how the process ended, for error reports.
type exitError struct {
	Component string `json:"component"`
	// Status is how it ended ("exit status 7", "signal: killed"), or
	// "exiting" once its output has ended but it has not been reaped yet,
	// or "running".
	Status string   `json:"exitStatus"`
	Stderr []string `json:"stderr,omitempty"`
}

func (p *process) describeExit() exitError {
	status := "running"
	select {
	case <-p.exited:
		status = "exited 0"
		if p.waitErr != nil {
			status = p.waitErr.Error() // an *exec.ExitError: "exit status 7", "signal: killed"
		}
	default:
		// Ended output is a component on its way out (or being stopped
		// for it), whose status Wait has yet to give.
		select {
		case <-p.eof:
			status = "exiting"
		default:
		}
	}
	return exitError{Component: p.name, Status: status, Stderr: p.stderr.lines()}
}

// reportBound is how long a component whose output has ended gets to exit
// and finish its stderr before what was pending on it is answered, so
// that the answer carries its exit status and last lines.
const reportBound = time.Second

// awaitReport waits, up to reportBound, for the process to be reaped and
// its stderr to be read to the end.
func (p *process) awaitReport() {
	// One bound for both: a channel from time.After fires only once.
	bound, cancel := context.WithTimeout(context.Background(), reportBound)
	defer cancel()
	for _, c := range []chan struct{}{p.exited, p.drained} {
		select {
		case <-c:
		case <-bound.Done():
		}
	}
}

// tail keeps the last n lines written to it.
type tail struct {
	mu   sync.Mutex
	n    int
	buf  []string
	next int
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) < t.n {
		t.buf = append(t.buf, line)
		return
	}
	t.buf[t.next] = line
	t.next = (t.next + 1) % t.n
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(append([]string(nil), t.buf[t.next:]...), t.buf[:t.next]...)
}

// componentName returns c's name, defaulting to its program's base name.
func componentName(c Component) string {
	if c.Name != "" {
		return c.Name
	}
	return strings.TrimSuffix(filepath.Base(c.Command), filepath.Ext(c.Command))
}

func startError(c Component, err error) error {
	name := componentName(c)
	return named(name, fmt.Errorf("component %q: start %s: %w", name, c.Command, err))
}

// stripTerminal removes what is meant for a terminal from a line of a
// component's stderr (colours, cursor movement, titles, carriage returns),
// so that logs and error data carry only the text.
func stripTerminal(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f || r == 0x9b }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[': // CSI: parameters, then a final byte
			i += 2
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
		case c == 0x1b && i+1 < len(s) && (s[i+1] == ']' || s[i+1] == 'P' || s[i+1] == '_' || s[i+1] == '^'):
			// OSC, DCS, APC, PM: up to BEL or ST (ESC \\).
			i += 2
			for i < len(s) && s[i] != 0x07 && !(s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\') {
				i++
			}
			if i < len(s) && s[i] == 0x1b {
				i++
			}
		case c == 0x1b: // a two-byte escape, such as ESC 7 or ESC (B
			i++
			if i < len(s) && (s[i] == '(' || s[i] == ')') {
				i++
			}
		case c < 0x20 && c != '\t' || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
