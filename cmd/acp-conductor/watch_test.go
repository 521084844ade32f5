//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// detaching is a component that starts a child in its process group and a
// grandchild in a session of its own, each saying so on stderr, and then
// copies its input to its output.
const detaching = `{command: sh, args: [-c, "sh -c 'echo %[1]s grouped >&2; exec sleep 1000' & setsid sh -c 'echo %[1]s detached >&2; exec sleep 1000' & exec cat"]}`

// TestKilledConductorLeavesNothing kills the conductor with SIGKILL, which
// it never sees, once each of its components (a proxy and an agent) has
// started a child in its process group and a grandchild in a session of
// its own: the components die of their parent-death signal, and the
// chain's watchdog kills the rest. Within a bound, no process of the chain
// is left, the watchdog included. It kills at once, while the watchdog,
// at the lowest priority, may still be starting, and after an initialize
// has crossed the chain.
func TestKilledConductorLeavesNothing(t *testing.T) {
	for _, when := range []string{"at once", "after initialize"} {
		t.Run(when, func(t *testing.T) {
			marker := "ACP_TEST_WATCH=" + strconv.FormatUint(rand.Uint64(), 16)
			chain := writeFile(t, "chain.yaml", "proxies:\n  - "+fmt.Sprintf(detaching, "proxy")+"\nagent: "+fmt.Sprintf(detaching, "agent")+"\n")
			cmd := exec.Command(binary, "agent", "--log-level", "info", "--config", chain)
			cmd.Env = append(cleanEnv(), marker)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				for _, pid := range markedPIDs(marker) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if when == "after initialize" {
				fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
			}
			// The conductor logs its components' stderr: each child says
			// it runs.
			want := map[string]bool{"proxy grouped": true, "proxy detached": true, "agent grouped": true, "agent detached": true}
			var logged bytes.Buffer
			sc := bufio.NewScanner(stderr)
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				for len(want) > 0 && sc.Scan() {
					logged.WriteString(sc.Text() + "\n")
					for w := range want {
						if strings.Contains(sc.Text(), w) {
							delete(want, w)
						}
					}
				}
			}()
			select {
			case <-ran:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-ran
			}
			if len(want) > 0 {
				t.Fatalf("not every child ran (missing %v):\n%s", want, logged.String())
			}
			// The conductor, its watchdog, two components and four children.
			// A process between fork and exec (a component's sh becoming
			// cat, a child's sh becoming sleep) may briefly show no
			// environment: wait, within a bound, until all are seen.
			deadline := time.Now().Add(20 * time.Second)
			for n := len(markedPIDs(marker)); n != 8; n = len(markedPIDs(marker)) {
				if time.Now().After(deadline) {
					t.Fatalf("%d processes of the chain running, want 8: %v", n, describePIDs(markedPIDs(marker)))
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("watchdog reading its pipe when the conductor was killed: %v", watchdogWaiting(marker))
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			go bufio.NewReader(stderr).WriteTo(new(bytes.Buffer)) // the watchdog may still hold stderr
			cmd.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for left := markedPIDs(marker); len(left) > 0; left = markedPIDs(marker) {
				select {
				case <-ctx.Done():
					t.Fatalf("still running 20s after the conductor was killed: %v", describePIDs(left))
				case <-tick.C:
				}
			}
		})
	}
}

// markedPIDs returns the live processes (not zombies) whose environment
// holds marker.
func markedPIDs(marker string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, []byte(marker+"\x00")) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	return pids
}

// watchdogWaiting reports whether the chain's watchdog is blocked reading
// its pipe, that is, done starting.
func watchdogWaiting(marker string) bool {
	for _, pid := range markedPIDs(marker) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if bytes.Contains(cmdline, []byte("component-supervisor")) {
			tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
			for _, task := range tasks {
				if wchan, _ := os.ReadFile(task); strings.Contains(string(wchan), "pipe") {
					return true
				}
			}
		}
	}
	return false
}

func describePIDs(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fmt.Fprintf(&b, "\n  %d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
	return b.String()
}

// TestWrapperChildSurvives: a wrapper script that starts a helper of its
// own and then execs the conductor (a common editor set-up) hands the
// conductor that helper as a child. It was not left by a chain, and is
// not killed with the chain's leftovers.
func TestWrapperChildSurvives(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	script := fmt.Sprintf(`sleep 300 </dev/null >/dev/null 2>&1 & echo $! > %s; exec %s agent "sh -c 'cat >/dev/null'"`, shellQuote(pidFile), shellQuote(binary))
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader("") // the editor hangs up at once
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("conductor: %v\n%s", err, out)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	// The conductor has exited: the helper, alive, is init's now.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if f := strings.Fields(string(stat)); err != nil || len(f) < 3 || f[2] == "Z" || !strings.Contains(string(stat), "(sleep)") {
		t.Errorf("the wrapper's helper (pid %d), started before the conductor, did not outlive it: %q, %v", pid, stat, err)
	}
}
