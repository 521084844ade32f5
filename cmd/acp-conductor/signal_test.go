package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalWhileLoading signals the conductor while it reads its chain
// file, a FIFO that blocks it until the test writes the chain: the signal
// must not kill it. It answers the editor's initialize with an error that
// says it is shutting down and exits 0, leaving no component running
// (whether it saw the signal before the chain would have started, and
// started nothing, or after, and stopped what it started).
func TestSignalWhileLoading(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "chain.yaml")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			started := filepath.Join(dir, "agent-started")
			s := start(t, "agent", "--config", fifo, "--shutdown-grace", "1s")
			cmd, stdin, stdout, stderr := s.cmd, s.stdin, s.stdout, s.stderr
			fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)

			// Opening the FIFO to write returns once the conductor has
			// opened it to read: it is loading its chain.
			opened := make(chan *os.File, 1)
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					panic(err)
				}
				opened <- w
			}()
			var w *os.File
			select {
			case w = <-opened:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0) // let the writer go
				t.Fatalf("the conductor never opened its chain file\n%s", stderr)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(w, "agent: {command: sh, args: [-c, 'echo $$ > %s; while read -r line; do :; done']}\n", started)
			w.Close()

			answer := make(chan string, 1)
			go func() { line, _ := bufio.NewReader(stdout).ReadString('\n'); answer <- line }()
			select {
			case line := <-answer:
				if !strings.Contains(line, `"id":0`) || !strings.Contains(line, `"error"`) || !strings.Contains(line, "shutting down") {
					t.Errorf("initialize answered %q, want an error saying the conductor is shutting down", line)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("initialize not answered 20s after %v\n%s", sig, stderr)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("after %v while loading: %v, want exit 0\n%s", sig, err, stderr)
			}
			if pid, err := os.ReadFile(started); err == nil {
				t.Logf("the agent had started (pid %s)", bytes.TrimSpace(pid))
				var n int
				fmt.Sscan(string(pid), &n)
				if err := syscall.Kill(n, 0); err != syscall.ESRCH {
					t.Errorf("the agent (pid %d) is still running: %v", n, err)
				}
			}
		})
	}
}
