package integration

import (
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

// TestOrphansAdopted runs a chain whose agent orphans two processes at
// once, each of which has left the agent's session and cleared its
// environment (a subshell that exits after starting env -i setsid sleep):
// neither the agent's process group nor the chain's marker finds them, and
// their parent is gone before the chain stops. The conductor adopts them:
// their parent becomes the conductor, not init. One is killed while the
// chain runs: the conductor must reap it, not leave it a zombie until it
// exits (as PID 1 in a container, for ever). The other runs on: the
// conductor must kill it as it ends.
func TestOrphansAdopted(t *testing.T) {
	requireConductor(t)
	ctx := testContext(t, 60*time.Second)
	// Sleeps no other process runs, to find the orphans by.
	reaped := fmt.Sprintf("%d.%03d", 5000+rand.IntN(1000), rand.IntN(1000))
	killed := fmt.Sprintf("%d.%03d", 6000+rand.IntN(1000), rand.IntN(1000))
	agent := fmt.Sprintf(`sh -c "(env -i setsid sleep %s &); (env -i setsid sleep %s &); exec sleep 1000"`, reaped, killed)
	cmd := exec.CommandContext(ctx, conductor, "agent", "--shutdown-grace", "200ms", agent)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("conductor's stderr:\n%s", stderr.String())
		}
	}()
	self := cmd.Process.Pid

	// adopted returns the PID of the live process running sleep secs once
	// its parent is the conductor.
	adopted := func(secs string) int {
		pid := 0
		waitFor(boundCtx(ctx, 20*time.Second), func() bool {
			for _, p := range sleeping(secs) {
				if p.PPID == self {
					pid = p.PID
					return true
				}
			}
			return false
		})
		if pid == 0 {
			t.Fatalf("no sleep %s whose parent is the conductor (%d): %v", secs, self, sleeping(secs))
		}
		return pid
	}
	first, second := adopted(reaped), adopted(killed)

	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := func() bool { _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(first))); return err != nil }
	if !waitFor(boundCtx(ctx, 10*time.Second), gone) {
		p, _ := readProc(first)
		t.Errorf("the killed orphan was not reaped by the conductor: %v", p)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("conductor: %v, want a clean stop", err)
	}
	if alive(second) {
		p, _ := readProc(second)
		t.Errorf("the orphan outlived the conductor: %v", p)
		_ = syscall.Kill(second, syscall.SIGKILL)
	}
}

// sleeping returns the live processes whose command line is "sleep secs".
func sleeping(secs string) []proc {
	want := "sleep\x00" + secs + "\x00"
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(b) != want {
			continue
		}
		if p, ok := readProc(pid); ok && p.State != 'Z' && p.State != 'X' {
			out = append(out, p)
		}
	}
	return out
}

// TestServeKillsAdopted: serve outlives its chains, so what a chain's
// agent orphans in a session and an environment of its own (which neither
// the chain's marker nor its components' tree finds) is adopted by serve.
// Once no chain runs, serve kills it, rather than keep it until serve
// itself stops.
func TestServeKillsAdopted(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	secs := fmt.Sprintf("%d.%03d", 7000+rand.IntN(1000), rand.IntN(1000))
	agent := fmt.Sprintf("(env -i PATH=/usr/bin:/bin setsid sleep %s &); exec %s", secs, agentCmd("agent"))
	s := startServe(t, shellJoin("sh", "-c", agent))
	ctx := testContext(t, 90*time.Second)
	rc := startClient(t, ctx, remoteConfig(clientConfig{Mode: "hold", HoldPrompt: "please hang", HoldAction: "wait"}, s.url, "ws"), nil)
	rc.event(t, ctx) // the prompt is active: the chain is running

	orphan := 0
	waitFor(boundCtx(ctx, 20*time.Second), func() bool {
		for _, p := range sleeping(secs) {
			if p.PPID == s.cmd.Process.Pid {
				orphan = p.PID
				return true
			}
		}
		return false
	})
	if orphan == 0 {
		t.Fatalf("no sleep %s whose parent is serve (%d): %v", secs, s.cmd.Process.Pid, sleeping(secs))
	}

	if err := rc.cmd.Process.Kill(); err != nil { // the connection ends, and its chain
		t.Fatal(err)
	}
	<-rc.done
	s.waitNoChains(t)
	if !waitFor(boundCtx(ctx, 10*time.Second), func() bool { return !alive(orphan) }) {
		p, _ := readProc(orphan)
		t.Errorf("the orphan outlived its chain, serve running: %v", p)
	}
}
