package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// markerVar is set (to a fresh random value per test) in the conductor's
// environment by the client; every component and grandchild inherits it, so
// scanning /proc for it finds whatever a test left running.
const markerVar = "ACP_IT_MARKER"

type proc struct {
	PID     int
	PPID    int
	PGID    int
	State   byte
	Cmdline string
}

func (p proc) String() string {
	return fmt.Sprintf("pid %d (ppid %d, pgid %d, state %c): %s", p.PID, p.PPID, p.PGID, p.State, p.Cmdline)
}

// markedProcs lists the live (non-zombie) processes whose environment holds
// markerVar=marker.
func markedProcs(marker string) []proc {
	want := []byte(markerVar + "=" + marker)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		found := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		p, ok := readProc(pid)
		if !ok || p.State == 'Z' || p.State == 'X' {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func readProc(pid int) (proc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return proc{}, false
	}
	p := proc{PID: pid, State: f[0][0]}
	p.PPID, _ = strconv.Atoi(f[1])
	p.PGID, _ = strconv.Atoi(f[2])
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	p.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	return p, true
}

// alive reports whether pid is a live, non-zombie process.
func alive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.State != 'Z' && p.State != 'X'
}

// waitFor polls cond until it holds or ctx ends; it reports whether it held.
func waitFor(ctx context.Context, cond func() bool) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
}

// waitGone waits, up to bound, until none of pids is alive; it returns those
// still alive.
func waitGone(ctx context.Context, bound time.Duration, pids []int) []int {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var left []int
	waitFor(ctx, func() bool {
		left = left[:0]
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		return len(left) == 0
	})
	return left
}

// killMarked kills, by pid, every process still carrying marker; they were
// all started by this test (through the client and the conductor).
func killMarked(t *testing.T, marker string) {
	for _, p := range markedProcs(marker) {
		t.Logf("killing leftover %v", p)
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// withMarker gives cfg a fresh marker (markerChecked).
func withMarker(t *testing.T, cfg *clientConfig) string {
	t.Helper()
	marker := markerChecked(t)
	if cfg.ChildEnv == nil {
		cfg.ChildEnv = map[string]string{}
	}
	cfg.ChildEnv[markerVar] = marker
	return marker
}

// markerChecked returns a fresh marker and registers a cleanup that checks
// that nothing carrying it outlives the test (within bound), killing and
// reporting whatever does.
func markerChecked(t *testing.T) string {
	t.Helper()
	marker := newMarker()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var left []proc
		waitFor(ctx, func() bool { left = markedProcs(marker); return len(left) == 0 })
		if len(left) > 0 {
			t.Errorf("processes left running after the test:\n%s", procList(left))
			killMarked(t, marker)
		}
	})
	return marker
}

func procList(ps []proc) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %v\n", p)
	}
	return b.String()
}

func pids(ps []proc) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.PID
	}
	return out
}
