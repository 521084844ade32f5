package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Run runs args as a component and returns the exit status to leave with.
// The component inherits the supervisor's stdio and process group, so
// nothing is copied and the conductor's own shutdown (which signals the
// group) works as before. When the conductor is gone, the kernel sends the
// supervisor SIGTERM (its parent-death signal), and the supervisor kills its
// whole process group, component and grandchildren alike.
func Run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "component-supervisor: no command")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "component-supervisor: %v\n", err)
		return 127
	}
	done := make(chan struct{})
	go func() { // owned: Run waits for done below
		defer close(done)
		_ = cmd.Wait()
	}()
	for {
		select {
		case <-done:
			return exitStatus(cmd.ProcessState)
		case <-sigs:
			if os.Getppid() != parent {
				// The conductor is gone: take everything it started with it.
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
			// Otherwise the conductor is stopping the group itself, and the
			// component got the same signal: wait for it.
		}
	}
}

// exitStatus mirrors the component's end: its exit code, or its signal
// re-raised so that the conductor's report shows it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
	}
	return ps.ExitCode()
}
