//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/transport"
)

// TestServeReapsWatchdog: once a chain served over the network has
// stopped, serve, which outlives it, has no zombie child left: the chain's
// watchdog, killed at its end, is reaped then, not when the next chain
// starts.
func TestServeReapsWatchdog(t *testing.T) {
	u, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-z"}, "--", shellQuote(demo)+" sample-agent")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialInitialized(ctx, t, "ws"+strings.TrimPrefix(u, "http"), transport.DialOptions{Header: http.Header{"Authorization": {"Bearer tok-z"}}}, log)
	if n := len(children(cmd.Process.Pid)); n < 2 {
		t.Fatalf("serve has %d children, not the agent and the watchdog\n%s", n, log)
	}
	c.Close()
	if !waitLine(ctx, log, "chain stopped") {
		t.Fatalf("the chain did not stop:\n%s", log)
	}
	// A killed process is a zombie only once it has finished dying, a
	// moment later: wait for serve to have no child at all.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for left := children(cmd.Process.Pid); len(left) > 0; left = children(cmd.Process.Pid) {
		select {
		case <-deadline.C:
			t.Fatalf("20s after its chain stopped, serve still has children (state Z: a zombie):%s\n%s", describeStats(left), log)
		case <-tick.C:
		}
	}
}

// children returns the processes whose parent is pid, as their
// /proc/PID/stat says, zombies included.
func children(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...", where comm may hold anything.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 || string(f[1]) != strconv.Itoa(pid) {
			continue
		}
		n, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, n)
	}
	return pids
}

// describeStats lists pids with their /proc/PID/stat.
func describeStats(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		fmt.Fprintf(&b, "\n  %s", bytes.TrimSpace(stat))
	}
	return b.String()
}
