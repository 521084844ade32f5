package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's master and slave ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestEditorMayAsk: a conductor that cannot start waits for an editor's
// request on a pipe, and not on a terminal.
func TestEditorMayAsk(t *testing.T) {
	_, slave := openPTY(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !editorMayAsk(r) {
		t.Error("a pipe is taken for a terminal")
	}
	if editorMayAsk(slave) {
		t.Error("a terminal is taken for an editor's pipe")
	}
}

// TestFlagErrorAtTerminal: with stdin a terminal, a flag typo or a chain
// that cannot start is reported on stderr, with the status it has under
// an editor, and stdin is not read: a line already typed there gets no
// JSON-RPC answer on stdout, as it would from an editor's pipe.
func TestFlagErrorAtTerminal(t *testing.T) {
	for _, args := range [][]string{
		{"proxy", "--verbose"},
		{"agent", "--config", "/no/such/chain.yaml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			piped := acp(t, initRequest, nil, args...)
			if !strings.Contains(piped.stdout, `"id":0`) {
				t.Fatalf("from a pipe, the request was not answered: %q", piped.stdout)
			}
			master, slave := openPTY(t)
			if _, err := master.WriteString(initRequest); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, args...)
			cmd.Env = cleanEnv()
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != piped.code {
				t.Errorf("exit status %d at a terminal, %d from a pipe", code, piped.code)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdin was read at a terminal: stdout %q", stdout.String())
			}
			if first, _, _ := strings.Cut(piped.stderr, "\n"); !strings.Contains(stderr.String(), first) {
				t.Errorf("stderr at a terminal %q lacks %q", stderr.String(), first)
			}
		})
	}
}
