package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/trick"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A child is a process the client launched and speaks to on its stdio.
type child struct {
	cmd    *exec.Cmd
	in     *os.File
	ch     *wire.LineChannel
	try    func([][]byte) ([][]byte, error) // writes in without blocking
	stderr *tail
	exited chan struct{}
	killed bool
}

// childEnv is added to the environment of every child: the tricks it is
// to go without (client -disable), and nothing else, so that the client
// itself, which is measuring, runs the same way in every run.
var childEnv []string

// launch starts argv with piped stdio. The environment is the client's,
// minus the conductor's own settings, so that a developer's
// ACP_CONDUCTOR_LOGGING_LEVEL=debug cannot skew a run, plus childEnv.
func launch(argv []string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACP_CONDUCTOR_") && !strings.HasPrefix(kv, trick.Env+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, in: inW, stderr: &tail{}, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	// os.Pipe's ends are non-blocking: the channel reads outR with raw
	// system calls, and try writes inW with them, so that the client, like
	// the agent, does not wake its runtime's monitor thread (see runAgent).
	c.ch = wire.NewLineChannel(outR, inW, 0)
	c.try = c.ch.TryWriter()
	go func() { cmd.Wait(); close(c.exited) }()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// send writes one line, which must end in a newline, with one write while
// the pipe has room for it. Only one goroutine sends at a time.
func (c *child) send(line []byte) error {
	if c.try != nil {
		rest, err := c.try([][]byte{line})
		if err != nil || len(rest) == 0 {
			return err
		}
		line = rest[0] // the pipe is full: wait for the rest in the poller
	}
	_, err := c.in.Write(line)
	return err
}

// recv reads and parses the next message.
func (c *child) recv() (*wire.Message, error) {
	line, err := c.ch.Recv()
	if err != nil {
		return nil, fmt.Errorf("reading from %s: %w%s", c.cmd.Args[0], err, c.stderr.report())
	}
	return wire.Parse(line)
}

// call sends a request and returns its answer, which must come next.
func (c *child) call(line []byte) (*wire.Message, error) {
	if err := c.send(line); err != nil {
		return nil, err
	}
	m, err := c.recv()
	if err != nil {
		return nil, err
	}
	if !m.IsResponse() || m.Error != nil {
		return nil, fmt.Errorf("unexpected answer %s", m.Bytes())
	}
	return m, nil
}

// watchdog kills the child (and so ends every read) if the scenario is
// still running after d. The returned function disarms it.
func (c *child) watchdog(d time.Duration) func() bool {
	t := time.AfterFunc(d, func() {
		c.killed = true
		c.cmd.Process.Kill()
	})
	return t.Stop
}

// finish closes the child's stdin and waits for it to exit, killing it after
// a few seconds.
func (c *child) finish() error {
	c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s did not exit after its stdin closed", c.cmd.Args[0])
	}
	if c.killed {
		return errors.New("the scenario ran past its deadline" + c.stderr.report())
	}
	if !c.cmd.ProcessState.Success() {
		return fmt.Errorf("%s: %s%s", c.cmd.Args[0], c.cmd.ProcessState, c.stderr.report())
	}
	return nil
}

// procStatus returns a field of /proc/PID/status in bytes (for the Vm*
// fields, which the kernel gives in kB).
// cpuUsage is what a process's threads have used so far.
type cpuUsage struct {
	cpuNs    int64 // time on a CPU
	switches int64 // voluntary context switches: times it went to sleep
}

func (u cpuUsage) sub(v cpuUsage) cpuUsage {
	return cpuUsage{u.cpuNs - v.cpuNs, u.switches - v.switches}
}

// usage sums the CPU time (schedstat, in ns rather than clock ticks) and the
// voluntary context switches of every thread of pid. A Go process keeps its
// threads, so a difference of two readings is what happened in between.
func usage(pid int) cpuUsage {
	var u cpuUsage
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		if data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat"); err == nil {
			if f := strings.Fields(string(data)); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				u.cpuNs += n
			}
		}
		if n, err := statusField(dir+"/"+t.Name()+"/status", "voluntary_ctxt_switches"); err == nil {
			u.switches += n
		}
	}
	return u
}

func procStatus(pid int, field string) (int64, error) {
	return statusField(fmt.Sprintf("/proc/%d/status", pid), field)
}

// statusField reads one numeric field of a /proc status file, in bytes if
// it is given in kB.
func statusField(path, field string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		if len(f) > 1 && f[1] == "kB" {
			n <<= 10
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

// tail keeps the last few KiB written to it: a child's stderr, for reports.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf); n > 8<<10 {
		t.buf = append(t.buf[:0], t.buf[n-(8<<10):]...)
	}
	return len(p), nil
}

func (t *tail) report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(bytes.TrimSpace(t.buf)) == 0 {
		return ""
	}
	return "\nstderr:\n" + string(t.buf)
}

var _ io.Writer = (*tail)(nil)
