package conductor

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// markedProcesses returns the pids of live processes whose environment
// carries marker.
func markedProcesses(t *testing.T, marker string) []int {
	t.Helper()
	return liveProcesses(func(dir string) bool {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		return err == nil && bytes.Contains(env, []byte(marker))
	})
}

// liveProcesses returns the pids of the live processes (not zombies) that
// match says are wanted, given their directory under /proc.
func liveProcesses(match func(dir string) bool) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		if !match(d) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie is dead, waiting for its parent
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	return pids
}

// TestChaos kills proxies at random under load from many sessions: every
// request is answered (a result, or an error naming the dead proxy), no
// goroutine outlives Run, and no component process outlives it either.
func TestChaos(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	marker := fmt.Sprintf("ACP_TEST_CHAOS=%d", rand.Int64())
	dir := t.TempDir()
	var proxies []Component
	for i := range 3 {
		p := fake(t, dir, fmt.Sprintf("p%d", i), "proxy", marker)
		p.OnFailure = PolicyRestart
		proxies = append(proxies, p)
	}
	e := startChain(t, Config{
		Proxies:      proxies,
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 100,
		GracePeriod:  time.Second,
	})
	e.send(initLine)
	e.recvMsg()

	// Forty sessions, each with at most one prompt outstanding, as an editor
	// has; a proxy is SIGKILLed after every sixty answers. A kill can fail
	// only what is in flight, so at most forty prompts per kill.
	const prompts, sessions, every = 600, 40, 60
	slots := make(chan struct{}, sessions)
	kill := make(chan struct{}, prompts/every)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range prompts {
			slots <- struct{}{}
			e.ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s%d","prompt":[],"_meta":{"tag":"t%d","updates":5}}}`, i, i%sessions, i))
		}
	}()
	kills := 0
	go func() {
		defer wg.Done()
		for range kill {
			if pids := markedProcesses(t, marker); len(pids) > 0 { // only the proxies carry the marker
				if syscall.Kill(pids[rand.IntN(len(pids))], syscall.SIGKILL) == nil {
					kills++
				}
			}
		}
	}()
	answered := map[string]bool{}
	failed := 0
	for len(answered) < prompts {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if answered[string(m.ID)] {
			t.Fatalf("request %s answered twice", m.ID)
		}
		answered[string(m.ID)] = true
		if m.Error != nil {
			failed++
		}
		<-slots
		if len(answered)%every == 0 && len(answered) < prompts {
			kill <- struct{}{}
		}
	}
	close(kill)
	wg.Wait()
	t.Logf("%d prompts answered, %d with errors, %d proxies killed", prompts, failed, kills)
	if kills == 0 || failed > kills*sessions {
		t.Errorf("%d failures for %d kills: more than the %d in flight each could fail", failed, kills, sessions)
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if left := markedProcesses(t, marker); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}
