package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// crashLoop writes a proxy that appends its pid to a file and exits at
// once, every time it is started, and returns its path and that file's.
func crashLoop(t *testing.T) (cmd, starts string) {
	t.Helper()
	dir := t.TempDir()
	cmd, starts = filepath.Join(dir, "crashloop"), filepath.Join(dir, "starts")
	script := fmt.Sprintf("#!/bin/sh\necho $$ >> %s\necho 'crashloop: giving up at once' >&2\nexit 3\n", shellQuote(starts))
	if err := os.WriteFile(cmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cmd, starts
}

// restartDelays returns the back-off of every "restarting component" entry
// in a JSON log.
func restartDelays(t *testing.T, log string) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Msg     string   `json:"msg"`
			Backoff *float64 `json:"backoff"` // seconds
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "restarting component" {
			continue
		}
		if e.Backoff == nil {
			t.Fatalf("no backoff in %s", line)
		}
		ds = append(ds, time.Duration(*e.Backoff*float64(time.Second)).Round(time.Millisecond))
	}
	return ds
}

// TestRestartBackoffCrashLoop runs the conductor with a restarted proxy that
// exits as soon as it starts: it is started again after each back-off in
// turn, doubling up to the maximum, until the restart limit is spent; then
// the editor's initialize is answered with an error naming it and the
// conductor exits 1, every process gone.
func TestRestartBackoffCrashLoop(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	proxy, starts := crashLoop(t)
	marker := newMarker()
	file := restartChain(t, proxy)
	begin := time.Now()
	p := startRaw(t, ctx, []string{"env", markerVar + "=" + marker, conductor, "agent", "--config", file, "--log-format", "json",
		"--restart-limit", "4", "--restart-backoff", "50ms", "--restart-backoff-max", "150ms"})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	m := p.recv(t, ctx)
	if string(m.ID) != "1" || m.Error == nil || !strings.Contains(string(m.Error), "crashloop") {
		t.Errorf("initialize answered %s, want an error naming crashloop", m.raw)
	}
	// The chain ends by itself once the limit is spent.
	err := p.cmd.Wait()
	took := time.Since(begin)
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("conductor exit %v, want status 1", err)
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond}
	if got := restartDelays(t, p.stderr.String()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("back-offs %v, want %v", got, want)
	}
	pidsSeen, _ := os.ReadFile(starts)
	if n := bytes.Count(pidsSeen, []byte("\n")); n != len(want)+1 {
		t.Errorf("the proxy started %d times, want %d: once and %d restarts", n, len(want)+1, len(want))
	}
	// Timers never fire early: the restarts took at least their back-offs.
	if sum := 450 * time.Millisecond; took < sum {
		t.Errorf("%d starts within %v, less than the back-offs' %v", len(want)+1, took, sum)
	}
	if !strings.Contains(p.stderr.String(), "restarted 4 times within 1m0s") {
		t.Errorf("the spent restart limit is not logged:\n%s", p.stderr)
	}
	var left []proc
	if !waitFor(boundCtx(ctx, cleanupBound), func() bool { left = markedProcs(marker); return len(left) == 0 }) {
		t.Errorf("still running after the conductor exited:\n%s", procList(left))
	}
}

// TestRestartBackoffShutdown closes the conductor's input while a crashed
// proxy waits out a back-off of an hour: the initialize queued for it is
// answered at once with an error naming it, and the conductor stops on the
// shutdown's own schedule, which the back-off does not stretch, and exits
// 0, every process gone. The schedule is read from the conductor's log,
// not from how fast this machine is: a component still running at the end
// of the grace period (the Node agent, under load) is signalled no sooner
// than that; the conductor's own measure of its stop, and its exit, come
// within the deadline (grace + 1 s) and a generous lateness, an hour short
// of the back-off.
func TestRestartBackoffShutdown(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	proxy, _ := crashLoop(t)
	marker := newMarker()
	p := startRaw(t, ctx, []string{"env", markerVar + "=" + marker, conductor, "agent", "--config", restartChain(t, proxy),
		"--log-format", "json", "--log-level", "debug", "--restart-backoff", "1h"})
	if !waitFor(ctx, func() bool { return len(restartDelays(t, p.stderr.String())) > 0 }) {
		t.Fatalf("the proxy was not restarted:\n%s", p.stderr)
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	p.stdin.Close()
	start := time.Now()
	m := p.recv(t, ctx)
	if string(m.ID) != "1" || m.Error == nil || !strings.Contains(string(m.Error), "the conductor is shutting down: the input from the client ended; the request was waiting on crashloop") {
		t.Errorf("initialize answered %s, want an error naming crashloop", m.raw)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("conductor exit: %v, want 0", err)
	}
	took := time.Since(start)

	const grace = 2 * time.Second // the default
	// What a loaded machine may add to the conductor's bound: generous,
	// since what the test guards against is an hour; twice that to its
	// exit, which waits for its own end and the process's.
	const lateness = 5 * time.Second
	var began time.Time
	var outcomes []logEntry
	for _, e := range logEntries(t, p.stderr.String()) {
		switch {
		case strings.HasPrefix(e.Msg, "draining"):
			began = e.at
		case e.Msg == "signalling the components still running":
			// Timestamps are in milliseconds, truncated.
			if began.IsZero() || e.at.Before(began.Add(grace-time.Millisecond)) {
				t.Errorf("%s sent at %v, before the grace period %v after the shutdown began at %v", e.Signal, e.at, grace, began)
			}
		case strings.HasPrefix(e.Msg, "stopped"):
			outcomes = append(outcomes, e)
		}
	}
	if began.IsZero() {
		t.Errorf("no start of the shutdown (draining) logged:\n%s", p.stderr)
	}
	if len(outcomes) != 1 || outcomes[0].Took == nil {
		t.Fatalf("outcomes logged: %+v, want one, with how long it took", outcomes)
	}
	if stop := time.Duration(*outcomes[0].Took * float64(time.Second)); stop > grace+time.Second+lateness {
		t.Errorf("the conductor took %v to stop (%q), want %v and at most %v more", stop, outcomes[0].Msg, grace+time.Second, lateness)
	}
	if took > grace+time.Second+2*lateness {
		t.Errorf("the conductor exited %v after its input closed, want %v and at most %v more", took, grace+time.Second, 2*lateness)
	}
	var left []proc
	if !waitFor(boundCtx(ctx, cleanupBound), func() bool { left = markedProcs(marker); return len(left) == 0 }) {
		t.Errorf("still running after the conductor exited:\n%s", procList(left))
	}
}

// A logEntry is a line of a JSON log, as far as the tests read it.
type logEntry struct {
	Msg    string   `json:"msg"`
	TS     string   `json:"ts"`
	Took   *float64 `json:"took"` // seconds
	Signal string   `json:"signal"`
	at     time.Time
}

// logEntries reads the entries of a JSON log, skipping lines that are not.
func logEntries(t *testing.T, log string) []logEntry {
	t.Helper()
	var es []logEntry
	for _, line := range strings.Split(log, "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg == "" {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z0700", e.TS)
		if err != nil {
			t.Fatalf("a log time %q: %v", e.TS, err)
		}
		e.at = at
		es = append(es, e)
	}
	return es
}

// restartChain writes a chain file of proxy, restarted when it fails, and
// the test agent, and returns its path.
func restartChain(t *testing.T, proxy string) string {
	t.Helper()
	chain := fmt.Sprintf("proxies:\n  - {command: %s, on_failure: restart}\nagent: {command: %s, args: [%s, --name, agent]}\n",
		proxy, nodeBin, filepath.Join(peersDir, "agent.mjs"))
	file := filepath.Join(t.TempDir(), "chain.yaml")
	if err := os.WriteFile(file, []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
