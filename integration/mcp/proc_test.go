package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// markerVar is set, to a fresh random value per run, in the conductor's
// environment; every component inherits it, and so does the stdio shim,
// which the agent starts in its own environment plus the declaration's.
// Scanning /proc for it finds whatever a run left running.
const markerVar = "ACP_MCP_IT_MARKER"

func newMarker() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// watchedMarker returns a new marker, and has the test fail, and kill
// them, if processes that carry it are left running once it ends.
func watchedMarker(t *testing.T) string {
	t.Helper()
	marker := newMarker()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if left, _ := leftovers(ctx, marker); len(left) > 0 {
			t.Errorf("processes left running:\n  %s", strings.Join(left, "\n  "))
			killMarked(marker)
		}
	})
	return marker
}

// markedProcs lists the live (non-zombie) processes whose environment holds
// markerVar=marker, as "pid: command line". It needs Linux's /proc; ok is
// false without it.
func markedProcs(marker string) (procs []string, ok bool) {
	want := []byte(markerVar + "=" + marker)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !hasEntry(env, want) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ...; comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		procs = append(procs, fmt.Sprintf("%d: %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
	}
	return procs, true
}

func hasEntry(env, want []byte) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// leftovers waits, until ctx is done, for every process carrying marker to
// be gone, and returns those that are not; ok is false if it cannot tell.
// A conductor reaps the components it stopped before it exits, and an agent
// its stdio servers when it closes them, so there is normally nothing to
// wait for.
func leftovers(ctx context.Context, marker string) (procs []string, ok bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		procs, ok := markedProcs(marker)
		if len(procs) == 0 {
			return nil, ok
		}
		select {
		case <-ctx.Done():
			return procs, true
		case <-tick.C:
		}
	}
}

// killMarked kills, by pid, every process still carrying marker: all were
// started by the run that set it.
func killMarked(marker string) {
	procs, _ := markedProcs(marker)
	for _, p := range procs {
		pid, _ := strconv.Atoi(p[:strings.IndexByte(p, ':')])
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
