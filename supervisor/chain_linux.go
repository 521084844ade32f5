package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Chain is the conductor's end of a chain's supervisor.
type Chain struct {
	cmd  *exec.Cmd
	conn *net.UnixConn

	spawnMu sync.Mutex    // one spawn at a time, so that answers come in order
	answers chan answer   // to spawns, from read; room for the one awaited
	done    chan struct{} // closed when read has returned

	mu    sync.Mutex
	exits map[int]chan syscall.WaitStatus // by PID, until reported
}

// An answer to a spawn, with the channel its end will come on.
type answer struct {
	event
	exit chan syscall.WaitStatus
}

// ErrGone reports a supervisor that ended before the component did.
var ErrGone = errors.New("the component supervisor ended")

// StartChain starts exe as a chain's supervisor. It has the kernel send the
// supervisor SIGTERM should the calling process die (which makes it kill
// every component), so it must be called from a goroutine whose thread
// lives as long as the process: any that has not locked its thread.
func StartChain(exe string) (*Chain, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("component supervisor: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor control"), os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close() // the supervisor has its own copy
	cmd := exec.Command(exe, Command, ChainFlag)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("component supervisor: %w", err)
	}
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("component supervisor: %w", err)
	}
	c := &Chain{cmd: cmd, conn: fc.(*net.UnixConn), answers: make(chan answer, 1), done: make(chan struct{}),
		exits: make(map[int]chan syscall.WaitStatus)}
	go c.read() // owned: Close waits for done
	return c, nil
}

// read takes the supervisor's messages: answers to spawns go to Spawn, ends
// of components to their waiters.
func (c *Chain) read() {
	defer close(c.done)
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for pid, ch := range c.exits {
			close(ch) // their waiters hear ErrGone
			delete(c.exits, pid)
		}
	}()
	buf := make([]byte, 4096)
	for {
		n, err := c.conn.Read(buf)
		if err != nil || n == 0 {
			return
		}
		var e event
		if json.Unmarshal(buf[:n], &e) != nil {
			continue
		}
		if e.Exited != 0 {
			c.mu.Lock()
			if ch, ok := c.exits[e.Exited]; ok {
				ch <- syscall.WaitStatus(e.Status)
				delete(c.exits, e.Exited)
			}
			c.mu.Unlock()
			continue
		}
		a := answer{event: e}
		if e.PID != 0 {
			// Registered before Spawn hears of it, so that an end that
			// comes right after is not missed.
			a.exit = make(chan syscall.WaitStatus, 1)
			c.mu.Lock()
			c.exits[e.PID] = a.exit
			c.mu.Unlock()
		}
		c.answers <- a // Spawn waits for it: spawns are one at a time
	}
}

// Spawn has the supervisor start path with argv (the program's name
// first), in dir with env, on the given stdin, stdout and stderr, in a
// process group of its own. It returns the component's PID, and a function
// that waits for its end and returns its wait status.
func (c *Chain) Spawn(path string, argv []string, dir string, env []string, stdio [3]*os.File) (int, func() (syscall.WaitStatus, error), error) {
	msg, err := json.Marshal(spawn{Path: path, Args: argv, Dir: dir, Env: env})
	if err != nil {
		return 0, nil, err
	}
	fds := make([]int, len(stdio))
	for i, f := range stdio {
		fds[i] = int(f.Fd())
	}
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	_, _, err = c.conn.WriteMsgUnix(msg, unix.UnixRights(fds...), nil)
	runtime.KeepAlive(stdio) // open until sent: Fd does not keep them open
	if err != nil {
		return 0, nil, fmt.Errorf("component supervisor: %w", err)
	}
	var a answer
	select {
	case a = <-c.answers:
	case <-c.done:
		return 0, nil, ErrGone
	}
	if a.Error != "" {
		return 0, nil, errors.New(a.Error)
	}
	wait := func() (syscall.WaitStatus, error) {
		ws, ok := <-a.exit
		if !ok {
			return 0, ErrGone
		}
		return ws, nil
	}
	return a.PID, wait, nil
}

// Close ends the chain: the supervisor kills whatever is still running
// below it and exits. Close returns once it has.
func (c *Chain) Close() error {
	err := c.conn.CloseWrite()
	if err != nil {
		c.conn.Close()
	}
	werr := c.cmd.Wait()
	c.conn.Close()
	<-c.done
	if err == nil {
		err = werr
	}
	return err
}
