package conductor

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/supervisor"
	"github.com/acp-conductor/acp-conductor/trace"
)

// stopped closes the editor's input and returns Run's result and how long
// Run took to return after that.
func (e *editor) stopped() (error, time.Duration) {
	start := time.Now()
	err := e.close()
	return err, time.Since(start)
}

// lateness is how late a loaded machine may run a step of the shutdown
// after its timer, or see a process die of SIGKILL: generous, since a test
// that waits for a step that never comes fails by it anyway, and the
// steps' lower bounds, which hold whatever the load, are checked exactly.
const lateness = 5 * time.Second

// checkShutdown checks the steps of a shutdown that began when the
// editor's input closed, at start, and ended when Run returned, from the
// signals the conductor logged (at debug level) as it sent them, and
// returns those signals, in order. SIGTERM comes no sooner than the grace
// period after start, and SIGKILL no sooner than termBound after SIGTERM,
// whatever the machine's load; each step, Run's return included, comes no
// later than lateness after it was due.
func checkShutdown(t *testing.T, logs *observer.ObservedLogs, start, returned time.Time, grace time.Duration) (sigs []string) {
	t.Helper()
	var at []time.Time
	for _, e := range logs.FilterMessage("signalling the components still running").All() {
		sigs = append(sigs, e.ContextMap()["signal"].(string))
		at = append(at, e.Time)
	}
	due := start.Add(grace) // every component gone by itself, or SIGTERM
	for i, sig := range sigs {
		if at[i].Before(due) || at[i].After(due.Add(lateness)) {
			t.Errorf("%s sent %v after the input closed, want %v (and at most %v more)", sig, at[i].Sub(start), due.Sub(start), lateness)
		}
		due = at[i].Add(termBound)
	}
	if len(sigs) > 0 {
		due = at[len(at)-1].Add(termBound + killBound + outputBound)
	}
	if returned.After(due.Add(lateness)) {
		t.Errorf("Run returned %v after the input closed, %v after it was due", returned.Sub(start), returned.Sub(due))
	}
	return sigs
}

// goneSoon waits, for up to lateness, until no live process carries
// marker: a process sent SIGKILL dies a moment later, which on a loaded
// machine can be after Run's bound on waiting for it has passed.
func goneSoon(t *testing.T, marker string) []int {
	t.Helper()
	deadline := time.Now().Add(lateness)
	for {
		left := markedProcesses(t, marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownBound stops chains of 0, 1 and 3 proxies whose components
// exit at the end of their input, ignore it, or ignore SIGTERM too. Those
// that exit by themselves are reaped before the grace period is over and
// before Run returns; the others get SIGTERM at the end of the grace
// period, never before, and those that ignore it SIGKILL termBound after,
// never before, and Run returns soon after the last signal, every process
// gone. The outcome is logged once, naming what had to be signalled. The
// lower bounds hold on any machine; how soon each step follows its timer
// depends on the machine's load, and is only bounded by lateness.
func TestShutdownBound(t *testing.T) {
	behaviours := []struct {
		name    string
		env     []string
		grace   time.Duration
		signals []string // sent, in order
	}{
		{"exit on EOF", nil, 5 * time.Second, nil},
		{"ignore EOF", []string{"ACP_TEST_IGNORE_EOF=1"}, time.Second, []string{"SIGTERM"}},
		{"ignore SIGTERM", []string{"ACP_TEST_IGNORE_EOF=1", "ACP_TEST_IGNORE_TERM=1"}, time.Second, []string{"SIGTERM", "SIGKILL"}},
	}
	for _, b := range behaviours {
		for _, n := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s/%d proxies", b.name, n), func(t *testing.T) {
				t.Parallel()
				marker := fmt.Sprintf("ACP_TEST_SHUTDOWN=%d", rand.Int64())
				env := append([]string{marker}, b.env...)
				dir := t.TempDir()
				var proxies []Component
				for i := range n {
					proxies = append(proxies, fake(t, dir, fmt.Sprintf("p%d", i), "proxy", env...))
				}
				core, logs := observer.New(zap.DebugLevel)
				e := startChain(t, Config{
					Proxies:     proxies,
					Agent:       fake(t, dir, "agent", "streamer", env...),
					GracePeriod: b.grace,
					Logger:      zap.New(core),
				})
				e.send(initLine)
				e.recvMsg()
				if got := len(markedProcesses(t, marker)); got != n+1 {
					t.Fatalf("%d marked processes running, want %d", got, n+1)
				}
				start := time.Now()
				err, took := e.stopped()
				if err != nil {
					t.Errorf("Run = %v", err)
				}
				if sigs := checkShutdown(t, logs, start, start.Add(took), b.grace); fmt.Sprint(sigs) != fmt.Sprint(b.signals) {
					t.Errorf("signals sent: %v, want %v", sigs, b.signals)
				}
				if b.signals == nil {
					// Each was reaped before Run returned.
					if left := markedProcesses(t, marker); len(left) > 0 {
						t.Errorf("processes left when Run returned: %v", left)
					}
					if took >= b.grace {
						t.Errorf("Run took %v, more than the grace period %v, with every component exiting at the end of its input", took, b.grace)
					}
				} else if left := goneSoon(t, marker); len(left) > 0 {
					t.Errorf("processes left %v after Run returned: %v", lateness, left)
				}
				var outcome []observer.LoggedEntry
				for _, e := range logs.All() {
					if strings.HasPrefix(e.Message, "stopped: ") {
						outcome = append(outcome, e)
					}
				}
				if len(outcome) != 1 {
					t.Fatalf("%d outcome entries, want 1: %v", len(outcome), logs.All())
				}
				msg := outcome[0].Message
				if b.signals == nil {
					if msg != "stopped: every component exited after its input closed" {
						t.Errorf("outcome %q, want every component exiting by itself", msg)
					}
					return
				}
				last := b.signals[len(b.signals)-1]
				for _, c := range append(proxies, Component{Name: "agent"}) {
					if !strings.Contains(msg, c.Name+" did not exit") || !strings.Contains(msg, last) {
						t.Errorf("outcome %q does not say %s needed %s", msg, c.Name, last)
					}
				}
				if !strings.Contains(msg, fmt.Sprintf("within the %v grace period", b.grace)) {
					t.Errorf("outcome %q does not say that the grace period ran out", msg)
				}
			})
		}
	}
}

// TestDrainAtEOF is an editor that writes initialize, session/new and a
// prompt and closes its input at once, before any answer: the agent holds
// the prompt until the conductor is draining, and all three real answers
// still arrive, the update the agent sends just before its answer too,
// through 1 and 3 proxies.
func TestDrainAtEOF(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("%d proxies", n), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var proxies []Component
			for i := range n {
				proxies = append(proxies, fake(t, dir, fmt.Sprintf("p%d", i), "proxy"))
			}
			hold := filepath.Join(dir, "hold")
			if err := syscall.Mkfifo(hold, 0o600); err != nil {
				t.Fatal(err)
			}
			log, logs := watchLogs(t)
			e := startChain(t, Config{
				Proxies:     proxies,
				Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_HOLD_PROMPT="+hold),
				GracePeriod: 10 * time.Second,
				Logger:      log,
			})
			e.send(initLine)
			e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"tag":"late","updates":1}}}`)
			e.in.Close()
			logs.wait(t, "draining")
			release(t, hold)
			var got []string
			for len(got) < 4 {
				m := e.recvMsg()
				switch {
				case m.IsResponse() && m.Error != nil:
					t.Fatalf("request %s failed: %s", m.ID, m.Error)
				case m.IsResponse():
					got = append(got, "answer "+string(m.ID))
				default:
					got = append(got, m.Method+" "+updateText(m))
				}
			}
			want := []string{"answer 0", "answer 1", "session/update late#0", "answer 2"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("editor got %q, want %q", got, want)
			}
			if err := e.close(); err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
}

// TestAbortSkipsDrain stops a chain (ctx, as a first SIGTERM does) with a
// prompt in flight that will never be answered, then aborts (a second
// SIGTERM): the prompt is answered with an error at once, not after the
// grace period. A request during the drain is refused with the reason
// the context ended for.
func TestAbortSkipsDrain(t *testing.T) {
	dir := t.TempDir()
	abort := make(chan struct{})
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(errors.New("received SIGTERM")) }
	defer cancel()
	log, logs := watchLogs(t)
	e := startChainCtx(t, ctx, Config{
		Proxies:     []Component{fake(t, dir, "p", "proxy")},
		Agent:       fake(t, dir, "agent", "mute", "ACP_TEST_IGNORE_EOF=1", "ACP_TEST_ANNOUNCE=1"),
		GracePeriod: time.Minute,
		Abort:       abort,
		Logger:      log,
	})
	e.send(initLine)
	logs.wait(t, "fake: received initialize")
	cancel()
	logs.wait(t, "draining")
	// The stopping chain takes no new request: this one is refused, which
	// shows that the drain has begun.
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
	if m := e.recvMsg(); string(m.ID) != "1" || !strings.Contains(string(m.Error), "shutting down: received SIGTERM") {
		t.Fatalf("request during the drain answered %s %s", m.ID, m.Error)
	}
	close(abort)
	m := e.recvMsg()
	if string(m.ID) != "0" || m.Error == nil {
		t.Errorf("pending initialize answered %s %s %s, want an error", m.ID, m.Result, m.Error)
	}
	if err, took := e.stopped(); err != nil || took > 10*time.Second {
		t.Errorf("Run = %v after %v", err, took)
	}
	logs.wait(t, "1 request(s) from the client were still unanswered when it was told to stop at once")
}

// TestShutdownAnswersPending stops a chain while the agent holds a prompt
// for good, through no proxy, a fake proxy and one built on the proxy
// library, whose handler forwards the prompt (as context-injector's does)
// and, once its input ends, answers it with an error of its own. However
// the chain stops (the editor's input ending, or a signal and a second
// one), the editor hears from the conductor that it is shutting down and
// why, naming the one component it knows the prompt waited on, the first,
// and none of the proxy's error. After a second signal the outcome says
// the grace period was cut short, not that it was spent.
func TestShutdownAnswersPending(t *testing.T) {
	for _, front := range []string{"", "proxy", "libproxy"} {
		for _, stop := range []string{"input ends", "second signal"} {
			t.Run(fmt.Sprintf("%s/%s", cmp.Or(front, "no proxy"), stop), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				hold := filepath.Join(dir, "hold") // never released
				if err := syscall.Mkfifo(hold, 0o600); err != nil {
					t.Fatal(err)
				}
				var proxies []Component
				first := "agent"
				if front != "" {
					proxies, first = []Component{fake(t, dir, front, front)}, front
				}
				abort := make(chan struct{})
				ctx, signal := context.WithCancelCause(context.Background())
				defer signal(nil)
				log, logs := watchLogs(t)
				cfg := Config{
					Proxies:     proxies,
					Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_HOLD_PROMPT="+hold, "ACP_TEST_ANNOUNCE=1"),
					GracePeriod: time.Second,
					Logger:      log,
				}
				if stop == "second signal" {
					cfg.GracePeriod, cfg.Abort = time.Minute, abort
				}
				e := startChainCtx(t, ctx, cfg)
				e.send(initLine)
				e.recvMsg()
				e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
				e.recvMsg()
				e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
				logs.wait(t, "fake: received session/prompt")
				why := "the input from the client ended"
				if stop == "second signal" {
					why = "received SIGINT"
					signal(errors.New(why))
					logs.wait(t, "draining")
					close(abort)
				} else {
					e.in.Close()
				}
				m := e.recvMsg()
				var got struct {
					Code    int
					Message string
					Data    struct{ Component, ExitStatus string }
				}
				json.Unmarshal(m.Error, &got)
				want := "the conductor is shutting down: " + why + "; the request was waiting on " + first
				if string(m.ID) != "2" || got.Code != int(codeInternalError) || got.Message != want || got.Data.Component != first || got.Data.ExitStatus == "" {
					t.Errorf("prompt answered %s %s, want -32603 %q with %s's exit status", m.ID, m.Error, want, first)
				}
				if err, _ := e.stopped(); err != nil {
					t.Errorf("Run = %v", err)
				}
				outcome := logs.logged("stopped: ")
				if len(outcome) != 1 {
					t.Fatalf("outcome %q, want one", outcome)
				}
				if stop == "second signal" {
					if strings.Contains(outcome[0], "grace period") || !strings.Contains(outcome[0], "agent was still running when the conductor was told to stop at once, and was stopped with SIGTERM") {
						t.Errorf("outcome %q, want the agent stopped with SIGTERM when told to stop at once", outcome[0])
					}
				}
			})
		}
	}
}

// TestSecondSignalOutcome stops a chain whose components ignore the end of
// their input, with nothing in flight, and then aborts (a second signal):
// the outcome says that each component was stopped with SIGTERM (or, for
// one that ignores it too, killed with SIGKILL) because the conductor was
// told to stop at once, not that the grace period, a minute, ran out.
func TestSecondSignalOutcome(t *testing.T) {
	dir := t.TempDir()
	abort := make(chan struct{})
	ctx, signal := context.WithCancelCause(context.Background())
	defer signal(nil)
	log, logs := watchLogs(t)
	e := startChainCtx(t, ctx, Config{
		Proxies: []Component{
			fake(t, dir, "p", "proxy", "ACP_TEST_IGNORE_EOF=1"),
			fake(t, dir, "q", "proxy", "ACP_TEST_IGNORE_EOF=1", "ACP_TEST_IGNORE_TERM=1"),
		},
		Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_IGNORE_EOF=1"),
		GracePeriod: time.Minute,
		Abort:       abort,
		Logger:      log,
	})
	e.send(initLine)
	e.recvMsg()
	signal(errors.New("received SIGINT"))
	logs.wait(t, "draining")
	close(abort)
	if err, took := e.stopped(); err != nil || took > 10*time.Second {
		t.Errorf("Run = %v after %v", err, took)
	}
	outcome := logs.logged("stopped: ")
	if len(outcome) != 1 {
		t.Fatalf("outcome %q, want one", outcome)
	}
	for _, name := range []string{"p", "agent"} {
		if want := name + " was still running when the conductor was told to stop at once, and was stopped with SIGTERM"; !strings.Contains(outcome[0], want) {
			t.Errorf("outcome %q, want %q", outcome[0], want)
		}
	}
	if want := "q was still running when the conductor was told to stop at once, and was killed with SIGKILL when it did not exit on SIGTERM"; !strings.Contains(outcome[0], want) {
		t.Errorf("outcome %q, want %q", outcome[0], want)
	}
	if strings.Contains(outcome[0], "grace period") {
		t.Errorf("outcome %q speaks of the grace period, which was cut short", outcome[0])
	}
}

// TestSignalAndEOF: a signal ends ctx and the editor's input ends, in
// either order, and the conductor stops at once, as after a second
// signal, rather than wait out the grace period (a minute here). Input
// first is acpx ending an agent that ignores the end of its input
// (Codex): it closes the input, then signals, and kills the conductor
// 1.6s later. Signal first is acpx's gap squeezed, or a Ctrl-C that
// reaches both editor and conductor.
func TestSignalAndEOF(t *testing.T) {
	for _, tc := range []struct {
		name        string
		signalFirst bool
		logged      string
	}{
		{"input first", false, "stopping at once: told to stop after the client's input ended"},
		{"signal first", true, "stopping at once: the client's input ended after it was told to stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, signal := context.WithCancelCause(context.Background())
			defer signal(nil)
			log, logs := watchLogs(t)
			e := startChainCtx(t, ctx, Config{
				Proxies:     []Component{fake(t, dir, "p", "proxy")},
				Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_IGNORE_EOF=1"),
				GracePeriod: time.Minute,
				Logger:      log,
			})
			e.send(initLine)
			e.recvMsg()
			if !tc.signalFirst {
				e.in.Close()
				logs.wait(t, "draining")
			}
			signal(errors.New("received SIGTERM"))
			if tc.signalFirst {
				logs.wait(t, "draining")
			}
			if err, took := e.stopped(); err != nil || took > 10*time.Second { // stopped closes the input
				t.Errorf("Run = %v after %v", err, took)
			}
			logs.wait(t, tc.logged)
			if want := "agent was still running when the conductor was told to stop at once, and was stopped with SIGTERM"; !strings.Contains(fmt.Sprint(logs.logged("stopped: ")), want) {
				t.Errorf("outcome %q, want %q", logs.logged("stopped: "), want)
			}
		})
	}
}

// TestFailureBeforeFirstRequest has the agent die before the editor sends
// anything: the editor's first request is answered with the failure,
// naming the agent and how it ended, with the chain's watchdog and without,
// and whether its command is found in PATH or is a path relative to its
// cwd.
func TestFailureBeforeFirstRequest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sup      string
		relative bool
	}{
		{"direct", "", false},
		{"supervised", supervised(t), false},
		{"supervised, relative to cwd", supervised(t), true},
		{"direct, relative to cwd", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log, logs := watchLogs(t)
			agent := fake(t, dir, "doomed", "crash")
			if tc.relative {
				if err := os.Symlink(agent.Command, filepath.Join(dir, "agent")); err != nil {
					t.Fatal(err)
				}
				agent.Command, agent.Dir = "./agent", dir
			}
			sup := tc.sup
			e := startChain(t, Config{
				Agent:       agent,
				GracePeriod: 10 * time.Second,
				Logger:      log,
				Supervisor:  sup,
			})
			logs.wait(t, "component failed")
			e.send(initLine)
			m := e.recvMsg()
			if m.Error == nil || !strings.Contains(string(m.Error), "doomed") || !strings.Contains(string(m.Error), "exit status 7") ||
				!strings.Contains(string(m.Error), "crashing on purpose") {
				t.Errorf("initialize answered %s %s, want the agent's failure", m.Result, m.Error)
			}
			if err, _ := e.stopped(); err == nil || !strings.Contains(err.Error(), "doomed") {
				t.Errorf("Run = %v", err)
			}
		})
	}
}

// TestWatchdogFails: a chain whose watchdog cannot be started (here, its
// binary is not there) stops, since nothing would outlive a killed
// conductor's components otherwise: the editor's requests are refused
// naming the watchdog, Run returns that error, and the agent, started
// before it, is gone.
func TestWatchdogFails(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_WATCHDOG=%d", rand.Int64())
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Agent:       fake(t, t.TempDir(), "agent", "streamer", marker),
		GracePeriod: 10 * time.Second,
		Logger:      log,
		Supervisor:  filepath.Join(t.TempDir(), "no-such-binary"),
	})
	// The chain stops at once, before the editor has asked anything, and
	// waits for the editor's first request, to answer it with why.
	logs.wait(t, "the client's next request is awaited, to be told why")
	e.send(initLine)
	if m := e.recvMsg(); m.Error == nil || !strings.Contains(string(m.Error), "chain watchdog") {
		t.Errorf("initialize answered %s %s, want a refusal naming the chain's watchdog", m.Result, m.Error)
	}
	if err, _ := e.stopped(); err == nil || !strings.Contains(err.Error(), "chain watchdog") {
		t.Errorf("Run = %v, want the watchdog's failure", err)
	}
	if left := goneSoon(t, marker); len(left) > 0 {
		t.Errorf("processes left %v after Run returned: %v", lateness, left)
	}
}

// TestWatchdogReaped: once Run has returned, the chain's watchdog, killed
// at the chain's end, is gone from the process table, neither running nor
// left a zombie, so that nothing of the chain outlives Run.
func TestWatchdogReaped(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_REAPED=%d", rand.Int64())
	e := startChain(t, Config{
		Agent:       fake(t, t.TempDir(), "agent", "agent", marker),
		GracePeriod: 10 * time.Second,
		Supervisor:  supervised(t),
	})
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil {
		t.Fatalf("initialize answered %s", m.Error)
	}
	pid, start := watchdogOf(t, marker)
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && startTime(stat) == start { // not its PID reused
		t.Errorf("the watchdog, %d, is still in the process table after Run returned: %s", pid, bytes.TrimSpace(stat))
	}
}

// watchdogOf returns the PID and start time of the watchdog of the chain
// whose components carry marker: the child of this process whose last
// argument is the chain's ID, as its components' environment gives it.
// The watchdog starts beside the chain's first messages: it is waited for.
func watchdogOf(t *testing.T, marker string) (pid int, start uint64) {
	t.Helper()
	comps := markedProcesses(t, marker)
	if len(comps) == 0 {
		t.Fatalf("no process carries %s", marker)
	}
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", comps[0]))
	var chain string
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(supervisor.MarkerEnv+"=")); ok {
			chain = string(v[bytes.LastIndexByte(v, ',')+1:])
		}
	}
	if chain == "" {
		t.Fatalf("component %d carries no %s", comps[0], supervisor.MarkerEnv)
	}
	self := strconv.Itoa(os.Getpid())
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, d := range procDirs() {
			stat, _ := os.ReadFile(filepath.Join(d, "stat"))
			args, _ := os.ReadFile(filepath.Join(d, "cmdline"))
			if f := statFields(stat); len(f) > 19 && f[1] == self &&
				bytes.Contains(args, []byte(supervisor.Command)) && bytes.HasSuffix(args, []byte("\x00"+chain+"\x00")) {
				pid, _ = strconv.Atoi(filepath.Base(d))
				return pid, startTime(stat)
			}
		}
	}
	t.Fatalf("no watchdog of chain %s runs", chain)
	return 0, 0
}

// procDirs returns the directories of the processes under /proc.
func procDirs() []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	return dirs
}

// statFields returns the fields of stat, a /proc/PID/stat, after the
// command name, which may hold anything: state, ppid, ... (starttime is the
// 20th); nil if stat has none.
func statFields(stat []byte) []string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// startTime returns the start time that stat, a /proc/PID/stat, gives,
// which tells a process from a later one under the same PID.
func startTime(stat []byte) uint64 {
	f := statFields(stat)
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// supervised returns this test binary, to run as the chain's watchdog as
// acp-conductor runs one for every chain.
func supervised(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestSetsidGrandchild runs a proxy that starts a grandchild in a session
// of its own (so outside the process group the conductor signals), keeping
// the proxy's stdout, and ignores the end of its input, as does the agent.
// Run returns once the grace period and the signals are over, and the
// grandchild is gone with everything else.
func TestSetsidGrandchild(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_SETSID=%d", rand.Int64())
	k, v, _ := strings.Cut(marker, "=")
	env := map[string]string{k: v}
	log, logs := watchLogs(t)
	core, signals := observer.New(zap.DebugLevel)
	const grace = 200 * time.Millisecond
	e := startChain(t, Config{
		Proxies: []Component{{Name: "detacher", Command: "sh", Args: []string{"-c",
			"setsid sh -c 'echo grandchild detached >&2; exec sleep 45' & exec sleep 1000"}, Env: env}},
		Agent:       Component{Name: "sleeper", Command: "sh", Args: []string{"-c", "echo agent started >&2; exec sleep 1000"}, Env: env},
		GracePeriod: grace,
		Supervisor:  supervised(t),
		Logger:      zap.New(zapcore.NewTee(log.Core(), core)),
	})
	// Each says so on its stderr once it runs: the grandchild from its own
	// session, where the conductor's signals to the group do not reach.
	logs.wait(t, "grandchild detached")
	logs.wait(t, "agent started")
	start := time.Now()
	err, took := e.stopped()
	if err != nil {
		t.Errorf("Run = %v", err)
	}
	if sigs := checkShutdown(t, signals, start, start.Add(took), grace); len(sigs) == 0 {
		t.Error("no component was signalled, though both ignore the end of their input")
	}
	if left := goneSoon(t, marker); len(left) > 0 {
		t.Errorf("processes left %v after Run returned: %v", lateness, left)
	}
}

// TestUnmarkedGrandchild is TestSetsidGrandchild with a grandchild that
// also clears its environment, so that it carries neither the chain's
// process group nor its marker: it is killed too by the time Run returns,
// found by its parent link while the proxy still ran. (The kill lands a
// moment later, which a loaded machine can stretch past the conductor's
// bound on waiting for it: the test waits for it to land. Unkilled, the
// grandchild sleeps for more than an hour.)
func TestUnmarkedGrandchild(t *testing.T) {
	// A sleep no other process runs, to find the grandchild by.
	secs := fmt.Sprintf("%d.%03d", 4000+rand.IntN(1000), rand.IntN(1000))
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Proxies: []Component{{Name: "detacher", Command: "sh", Args: []string{"-c",
			"env -i setsid sh -c 'echo grandchild unmarked >&2; exec sleep " + secs + "' & exec sleep 1000"}}},
		Agent:       Component{Name: "sleeper", Command: "sh", Args: []string{"-c", "echo agent started >&2; exec sleep 1000"}},
		GracePeriod: 200 * time.Millisecond,
		Supervisor:  supervised(t),
		Logger:      log,
	})
	logs.wait(t, "grandchild unmarked")
	logs.wait(t, "agent started")
	// The grandchild speaks before its exec, so its command line may not
	// be the sleep's yet.
	if !eventuallyRunning(t, "sleep", secs) {
		t.Fatal("the grandchild is not running: nothing to test")
	}
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
	deadline := time.Now().Add(lateness)
	for left := running(t, "sleep", secs); len(left) > 0; left = running(t, "sleep", secs) {
		if time.Now().After(deadline) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("the unmarked grandchild %v still ran %v after Run returned", left, lateness)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventuallyRunning reports whether a process whose command line is args
// appears within ten seconds.
func eventuallyRunning(t *testing.T, args ...string) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(running(t, args...)) == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// running returns the live processes whose command line is args.
func running(t *testing.T, args ...string) []int {
	t.Helper()
	want := []byte(strings.Join(args, "\x00") + "\x00")
	return liveProcesses(func(dir string) bool {
		cmd, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		return err == nil && bytes.Equal(cmd, want)
	})
}

// TestOutputClosedButAlive runs an agent that closes its stdout and keeps
// running: the conductor sees its output end (its watchdog holds no copy)
// and answers the editor's initialize with the failure at once, not after
// the initialize timeout.
func TestOutputClosedButAlive(t *testing.T) {
	e := startChain(t, Config{
		Agent:       Component{Name: "mute-agent", Command: "sh", Args: []string{"-c", "exec >&-; exec sleep 30"}},
		InitTimeout: time.Hour,
		GracePeriod: 200 * time.Millisecond,
		Supervisor:  supervised(t),
	})
	e.send(initLine)
	m := e.recvMsg()
	if m.Error == nil || !strings.Contains(string(m.Error), "mute-agent") || !strings.Contains(string(m.Error), "ended unexpectedly") {
		t.Errorf("initialize answered %s %s, want the agent's end", m.Result, m.Error)
	}
	if err, _ := e.stopped(); err == nil {
		t.Errorf("Run = nil, want the agent's failure")
	}
}

// TestLargeEnvironment starts, with the chain's watchdog, an agent whose
// environment is 300 KB more than the conductor's (the kernel takes up to
// 128 KiB per variable), larger than any one message on a socket (the
// supervisor this design replaced sent each environment in one): it
// answers initialize, with the chain's marker added.
func TestLargeEnvironment(t *testing.T) {
	dir := t.TempDir()
	var env []string
	for i := range 3 {
		env = append(env, fmt.Sprintf("ACP_TEST_BIG%d=%s", i, strings.Repeat("x", 100_000)))
	}
	e := startChain(t, Config{
		Agent:       fake(t, dir, "agent", "streamer", env...),
		GracePeriod: 10 * time.Second,
		Supervisor:  supervised(t),
	})
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil || m.Result == nil {
		t.Errorf("initialize answered %s %s, want a result", m.Result, m.Error)
	}
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestStripTerminal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"\x1b[31merror:\x1b[0m failed", "error: failed"},
		{"\x1b[1;38;5;196mbold red\x1b[m", "bold red"},
		{"\x1b]0;title\x07after", "after"},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"progress 10%\rprogress 20%", "progress 10%progress 20%"},
		{"tab\tkept", "tab\tkept"},
		{"\x1b7saved\x1b8", "saved"},
		{"ünïcode ✓ \x1b[2K", "ünïcode ✓ "},
		{"cut off \x1b[3", "cut off "},
	} {
		if got := stripTerminal(tc.in); got != tc.want {
			t.Errorf("stripTerminal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// release lets a fake agent that holds its prompt on the FIFO at path go
// on: it opens the FIFO to write, which waits for the agent to open it to
// read, and closes it.
func release(t *testing.T, path string) {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		f.Close()
	case <-time.After(20 * time.Second):
		os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // let the opener go
		t.Fatal("the agent never took its prompt")
	}
}

// TestDetachedHelperHoldingOutput: an agent that exits at the end of its
// input, leaving a helper in a session of its own that holds its stdout,
// does not make the stop wait out the grace period (an hour here) for an
// output that will not end; the helper is gone when Run returns.
func TestDetachedHelperHoldingOutput(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_HELPER=%d", rand.Int64())
	k, v, _ := strings.Cut(marker, "=")
	agent := fake(t, t.TempDir(), "agent", "agent", marker)
	agent.Command, agent.Args = "sh", []string{"-c", `setsid sh -c 'echo helper detached >&2; exec sleep 45' & exec "$0"`, agent.Command}
	agent.Env[k] = v
	log, logs := watchLogs(t)
	e := startChain(t, Config{Agent: agent, GracePeriod: time.Hour, Supervisor: supervised(t), Logger: log})
	logs.wait(t, "helper detached")
	e.send(initLine)
	e.recvMsg()
	if err := e.close(); err != nil { // it fails the test if Run takes 20 s
		t.Errorf("Run = %v", err)
	}
	if left := markedProcesses(t, marker); len(left) > 0 {
		t.Errorf("processes left when Run returned: %v", left)
	}
}

// TestClientOutputClosed: an editor that closes the conductor's output but
// not its input can hear nothing more: the chain stops, saying so, rather
// than run on until its input ends.
func TestClientOutputClosed(t *testing.T) {
	log, logs := watchLogs(t)
	e := startChain(t, Config{Agent: fake(t, t.TempDir(), "agent", "agent"), Logger: log})
	e.send(initLine)
	e.recvMsg()
	e.out.Close()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	logs.wait(t, "the client's output is closed")
	select {
	case err := <-e.done:
		e.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return with its input still open")
	}
}

// TestExitWithDetachedHolder: an agent that exits (status 3) leaving a
// helper in a session of its own that holds its stdout is still seen to
// have ended: the editor's pending initialize fails at once with the
// agent's exit status, rather than wait for an output that will not end,
// and the helper is gone when Run returns.
func TestExitWithDetachedHolder(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_HOLDER=%d", rand.Int64())
	k, v, _ := strings.Cut(marker, "=")
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Agent: Component{Name: "quitter", Command: "sh", Args: []string{"-c",
			`setsid sh -c 'echo holder detached >&2; exec sleep 45' & read line; exit 3`}, Env: map[string]string{k: v}},
		InitTimeout: time.Hour,
		Supervisor:  supervised(t),
		Logger:      log,
	})
	logs.wait(t, "holder detached")
	e.send(initLine) // the agent reads it, and exits
	m := e.recvMsg()
	if m.Error == nil || !strings.Contains(string(m.Error), "quitter") || !strings.Contains(string(m.Error), "exit status 3") {
		t.Errorf("initialize answered %s %s, want the agent's exit", m.Result, m.Error)
	}
	if err, _ := e.stopped(); err == nil {
		t.Error("Run = nil, want the agent's failure")
	}
	if left := markedProcesses(t, marker); len(left) > 0 {
		t.Errorf("processes left when Run returned: %v", left)
	}
}

// TestExitStatusAtShutdown: at shutdown, the agent closes its output while
// the proxy's request to it is in flight, and exits with status 3, at once
// or only once its input ends (here after the conductor has answered).
// The error the conductor answers the request with, as the trace records it,
// says how the agent ended, or that it is exiting; never that it is running.
func TestExitStatusAtShutdown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger bool
		want   string
	}{
		{"exits", false, "exit status 3"},
		{"lingers", true, "exiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			agent.Env["ACP_TEST_PIPE_EXIT"] = "3"
			if tc.linger {
				agent.Env["ACP_TEST_PIPE_LINGER"] = "1"
			}
			records := make(chan trace.Event, 64)
			r, w := io.Pipe()
			go func() {
				sc := bufio.NewScanner(r)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					var ev trace.Event
					if json.Unmarshal(sc.Bytes(), &ev) == nil {
						select {
						case records <- ev:
						default: // the test has what it needs
						}
					}
				}
			}()
			rec := trace.NewRecorder(w, trace.Options{})
			t.Cleanup(func() { rec.Close(); w.Close() })
			// The grace period is never reached: everything exits by itself.
			e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, GracePeriod: time.Minute, Trace: rec})
			p, a := proxyStarted(), agentStarted()

			e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
			init := p.recvMsg()
			p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(init.Params) + `}}`)
			a.reply(a.recvMsg(), `{"protocolVersion":1}`)
			p.recvMsg()
			p.reply(init, `{"protocolVersion":1}`)
			e.recvMsg()
			p.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"x/hold","params":{}}}`)
			if m := a.recvMsg(); m.Method != "x/hold" {
				t.Fatalf("the agent got %s, want x/hold", m.Bytes())
			}

			// The editor leaves: the components are stopped, the proxy's
			// input closed first. Once it has ended, the agent is known to
			// be stopping too; it closes its output.
			e.in.Close()
			for ended := false; !ended; {
				select {
				case _, more := <-p.lines:
					ended = !more
				case <-time.After(20 * time.Second):
					t.Fatal("the proxy's input never ended")
				}
			}
			a.w.(*net.UnixConn).CloseWrite()
			if !tc.linger {
				p.w.Close() // the proxy exits; then the agent's input closes
			}
			var answer trace.Event
			for answer.Type != trace.TypeResponse || answer.Method != "x/hold" {
				select {
				case answer = <-records:
				case <-time.After(20 * time.Second):
					t.Fatal("the proxy's request was never answered in the trace")
				}
			}
			var payload struct {
				Data exitError
			}
			json.Unmarshal(answer.Payload, &payload)
			if answer.From != "conductor" || !*answer.IsError || payload.Data.Component != "agent" || payload.Data.Status != tc.want {
				t.Errorf("the proxy's request was answered %s -> %s %s, want the conductor's error naming the agent, %q", answer.From, answer.To, answer.Payload, tc.want)
			}
			if tc.linger {
				p.w.Close()
			}
			if err := e.close(); err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
}

// TestShutdownAnswersRequestsToClient stops a chain (ctx, as a signal
// does) while a request of the agent's to the editor, a permission
// request, is unanswered, with the editor still connected and nothing of
// its own in flight: through no proxy, or one that passed it on. Before
// any input closes, its asker (the agent, or the proxy) gets the
// conductor's error saying that it is shutting down, why, and that the
// request waited on the client, as the client's own requests do; the
// editor's late answer is dropped, and the asker's input ends.
func TestShutdownAnswersRequestsToClient(t *testing.T) {
	const ask = `{"jsonrpc":"2.0","id":"perm","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{},"options":[]}}`
	for _, front := range []string{"no proxy", "proxy"} {
		t.Run(front, func(t *testing.T) {
			dir := t.TempDir()
			ctx, signal := context.WithCancelCause(context.Background())
			defer signal(nil)
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			cfg := Config{Agent: agent, GracePeriod: time.Minute}
			var proxyStarted func() *scripted
			if front == "proxy" {
				var proxy Component
				proxy, proxyStarted = scriptedComponent(t, dir, "proxy")
				cfg.Proxies = []Component{proxy}
			}
			ed := scriptedEditor(startChainCtx(t, ctx, cfg))
			var p *scripted
			if proxyStarted != nil {
				p = proxyStarted()
			}
			ag := agentStarted()

			ed.send(initLine)
			asker, id := ag, `"perm"`
			if p != nil {
				init := p.recvMsg()
				p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(init.Params) + `}}`)
				ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
				p.reply(init, string(p.recvMsg().Result))
			} else {
				ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
			}
			ed.recvMsg()
			ag.send(ask)
			if p != nil {
				m := p.recvMsg()
				method, params := carriedMethod(t, m)
				if method != "session/request_permission" {
					t.Fatalf("the proxy got %s, want the agent's permission request", m.Bytes())
				}
				p.send(`{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":` + string(params) + `}`)
				asker, id = p, `"p1"`
			}
			m := ed.recvMsg()
			if m.Method != "session/request_permission" {
				t.Fatalf("the editor got %s, want the permission request", m.Bytes())
			}

			signal(errors.New("received SIGTERM"))
			ans := asker.recvMsg()
			want := "the conductor is shutting down: received SIGTERM; the request was waiting on client"
			if string(ans.ID) != id || ans.Error == nil || errorMessage(ans.Error) != want {
				t.Fatalf("%s's permission request got %s, want an error saying %q", asker.name, ans.Bytes(), want)
			}
			ed.reply(m, `{"outcome":{"outcome":"cancelled"}}`) // too late: dropped
			inputEnded(t, asker)
		})
	}
}

// TestShutdownSealsClient: an agent that never ends its turn, and streams
// on after its input ends, has its prompt failed at the deadline; from
// that error on, the editor hears nothing more of the agent's updates,
// and the log says how many were dropped, in one line.
func TestShutdownSealsClient(t *testing.T) {
	dir := t.TempDir()
	log, logs := watchLogs(t)
	e := startChain(t, Config{
		Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_STREAM_FOREVER=1", "ACP_TEST_IGNORE_EOF=1"),
		GracePeriod: 200 * time.Millisecond,
		Logger:      log.WithOptions(zap.IncreaseLevel(zap.InfoLevel)),
	})
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	if m := e.recvMsg(); m.Method != "session/update" {
		t.Fatalf("got %s, want the agent's first update", e.seen[len(e.seen)-1])
	}
	e.in.Close()
	promptFailedLast(t, e)
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if got := logs.logged("dropped notifications for the client"); len(got) != 1 {
		t.Errorf("logged %q, want one summary of the updates dropped", got)
	}
}

// promptFailedLast reads what the editor gets until its prompt (id 2)
// fails with the shutdown's error, and checks that nothing follows it.
func promptFailedLast(t *testing.T, e *editor) {
	t.Helper()
	for {
		m := e.recvMsg()
		if m.IsResponse() {
			if string(m.ID) != "2" || !strings.Contains(string(m.Error), "shutting down") {
				t.Fatalf("prompt answered %s, want the shutdown's error", e.seen[len(e.seen)-1])
			}
			break
		}
	}
	after := 0
	for {
		line, err := e.ch.Recv()
		if err != nil {
			break
		}
		after++
		if after == 1 {
			t.Errorf("after the prompt's error the editor got %s", line)
		}
	}
	if after > 0 {
		t.Errorf("%d messages reached the editor after its prompt failed", after)
	}
}

// TestShutdownSealsClientMCP: an agent at work forever streams MCP
// notifications on its connection to the editor's own acp server; once
// the editor's prompt has failed, none of them reaches it either, though
// the MCP router, not the position route, addresses them to the editor
// (past the proxy the agent's messages go to by position).
func TestShutdownSealsClientMCP(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent: fake(t, dir, "agent", "streamer", "ACP_TEST_STREAM_FOREVER=1", "ACP_TEST_IGNORE_EOF=1",
			"ACP_TEST_STREAM_MCP=srv-1"),
		GracePeriod: 200 * time.Millisecond,
	})
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	for {
		m := e.recvMsg()
		if m.Method == "mcp/connect" {
			e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"connectionId":"ed-c1"}}`)
		}
		if m.Method == "mcp/message" {
			break // the notifications stream
		}
	}
	e.in.Close()
	promptFailedLast(t, e)
}

// TestShutdownDropsLoggedOnce: an agent streams on to a proxy that has
// exited as the chain stops; each update is dropped, and the log says so
// once as it begins and once with the count, not once an update.
func TestShutdownDropsLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.DebugLevel)
	e := startChain(t, Config{
		Proxies:     []Component{fake(t, dir, "p", "proxy")},
		Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_STREAM_FOREVER=1", "ACP_TEST_IGNORE_EOF=1"),
		GracePeriod: 200 * time.Millisecond,
		Logger:      zap.New(core),
	})
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	e.recvMsg() // the first update
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
	first := logs.FilterMessageSnippet("dropped message for closed peer").All()
	if len(first) != 1 || first[0].ContextMap()["peer"] != "p" {
		t.Fatalf("logged %d lines for dropped messages, want one, for p, as the first drop", len(first))
	}
	counted := logs.FilterMessage("dropped messages for closed peer").All()
	if len(counted) != 1 {
		t.Fatalf("logged %d counts of drops, want one", len(counted))
	}
	if n, _ := counted[0].ContextMap()["count"].(int64); n < 2 {
		t.Errorf("count of drops %v, want more than one: the agent streamed on for the whole of minEOF", counted[0].ContextMap())
	}
}

// TestOutcomeOwnKill: a process of a restarted or bypassed component that
// its own stop had killed before the shutdown's signals is named once,
// as killed with SIGKILL, and why; not as stopped with SIGTERM.
func TestOutcomeOwnKill(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	outcome{signalled: []signalled{
		{component: "proxy (replaced, pid 7)", signal: "SIGKILL", own: true},
		{component: "agent", signal: "SIGTERM"},
	}}.log(zap.New(core), 2*time.Second)
	all := logs.All()
	want := "stopped: proxy (replaced, pid 7) did not exit within the 2s grace period after its input closed as it was restarted or bypassed, nor on SIGTERM, and had been killed with SIGKILL by then; " +
		"agent did not exit within the 2s grace period and was stopped with SIGTERM"
	if len(all) != 1 || all[0].Message != want {
		t.Errorf("logged %v, want %q", all, want)
	}
}

// TestShutdownKillWaitShared: the replaced processes a component's own
// stop killed before the shutdown's signals, still not gone, are waited
// for together, within one killBound, not one killBound apiece. They
// are not signalled again (their pids are past any pid_max), and are
// named once each.
func TestShutdownKillWaitShared(t *testing.T) {
	var waits []time.Duration
	r := &runner{
		cfg: Config{exitWait: func(d time.Duration) <-chan time.Time {
			waits = append(waits, d)
			up := make(chan time.Time, 1)
			up <- time.Time{} // none of them ever exits: the wait is up at once
			return up
		}},
		log:   zap.NewNop(),
		chain: &chain{flow: newFlow()},
		cut:   make(chan struct{}),
	}
	for i := range 3 {
		proc := &process{name: "proxy", pid: 1<<30 + i, exited: make(chan struct{})}
		proc.killed.Store(true)
		r.retired = append(r.retired, &link{proc: proc})
	}
	sent, _ := r.stopAll(context.Background(), time.Now())
	if len(waits) != 1 || waits[0] != killBound {
		t.Errorf("waited %v for the processes to exit, want one wait of %v for all", waits, killBound)
	}
	if len(sent) != 3 {
		t.Fatalf("outcome names %d processes, want 3: %v", len(sent), sent)
	}
	for _, s := range sent {
		if s.signal != "SIGKILL" || !s.own {
			t.Errorf("outcome %+v, want the process's own SIGKILL", s)
		}
	}
}
