package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cleanupBound is how long the conductor may take to leave no process behind
// once its end has been triggered: the default grace period (2s) for
// components to exit after their stdin closes, plus room for signals and a
// loaded machine.
const cleanupBound = 20 * time.Second

// TestShutdownOnStdinClose closes the conductor's stdin (as an editor does
// when it is done) and checks that the conductor exits 0 and that no
// component, nor any grandchild, is left. Every process started for a test
// carries a random marker in its environment; /proc is scanned for it.
func TestShutdownOnStdinClose(t *testing.T) {
	requireConductor(t)
	cases := []struct {
		name   string
		chain  func() []string
		hold   bool // close while a prompt is in flight, else after the conversation
		expect int  // processes with the marker while active: conductors, components, grandchildren
	}{
		{
			name: "idle",
			chain: func() []string {
				return []string{goProxyCmd("go1"), pyProxyCmd("py2"), agentCmd("agent", "--grandchild")}
			},
		},
		{
			name: "prompt in flight",
			chain: func() []string {
				return []string{goProxyCmd("go1"), pyProxyCmd("py2"), agentCmd("agent", "--grandchild")}
			},
			hold:   true,
			expect: 5, // conductor, go1, py2, agent, agent's sleep
		},
		{
			// The agent ignores EOF; the conductor must signal it after the
			// grace period, and signal its process group to reach the sleep
			// (node dies on SIGTERM without running its exit handlers).
			name:   "agent ignores EOF",
			chain:  func() []string { return []string{goProxyCmd("go1"), agentCmd("agent", "--grandchild", "--ignore-eof")} },
			hold:   true,
			expect: 4,
		},
		{
			name: "nested conductor",
			chain: func() []string {
				return []string{goProxyCmd("go1"), nestedCmd(pyProxyCmd("py2"), goProxyCmd("go3")), agentCmd("agent", "--grandchild")}
			},
			hold:   true,
			expect: 7, // 2 conductors, go1, py2, go3, agent, sleep
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			cfg := conversationConfig(t, "shutdown")
			cfg.ExitTimeoutMs = int(cleanupBound / time.Millisecond)
			if c.hold {
				cfg = clientConfig{Mode: "hold", HoldPrompt: "please hang", HoldAction: "close-on-eof", ExitTimeoutMs: cfg.ExitTimeoutMs}
			}
			marker := withMarker(t, &cfg)
			rc := startClient(t, ctx, cfg, agentModeArgs(c.chain()...))

			var running []proc
			if c.hold {
				ev := rc.event(t, ctx)
				running = markedProcs(marker)
				t.Logf("active (conductor pid %d):\n%s", ev.PID, procList(running))
				// Each conductor also has its watchdog; count the rest.
				n := 0
				for _, p := range running {
					if !strings.Contains(p.Cmdline, "component-supervisor") {
						n++
					}
				}
				if n != c.expect {
					t.Errorf("found %d marked processes besides watchdogs while active, want %d", n, c.expect)
				}
				if !containsPID(running, ev.PID) {
					t.Errorf("the conductor (pid %d) is not among the marked processes", ev.PID)
				}
				rc.stdin.Close() // the client now closes the conductor's stdin
			}

			s := rc.wait(t)
			for _, f := range s.Failures {
				t.Errorf("client: %s", f)
			}
			if s.exitCode() != 0 {
				t.Errorf("conductor exit after its stdin closed: %s, want code 0", s.exitString())
			}
			var left []proc
			waitFor(boundCtx(ctx, cleanupBound), func() bool { left = markedProcs(marker); return len(left) == 0 })
			if len(left) > 0 {
				t.Errorf("still running %v after the conductor exited:\n%s", cleanupBound, procList(left))
			}
		})
	}
}

// TestConductorSignalled sends SIGTERM or SIGKILL to the conductor while a
// prompt is in flight. After either, the whole tree must go: after SIGTERM
// the conductor stops it; after SIGKILL, which the conductor never sees, the
// components die of their parent-death signal, and the chain's watchdog
// (a shell named "acp-conductor component-supervisor"), which sees the end of the
// conductor's pipe, kills the rest: the components' process groups and
// every process carrying the chain's marker, grandchildren included, even
// those of an agent that ignores the end of its input, and the inner
// conductor's chain.
func TestConductorSignalled(t *testing.T) {
	requireConductor(t)
	cases := []struct {
		name   string
		sig    syscall.Signal
		flags  []string // agent flags
		strict bool     // every marked process must go, not just direct children
	}{
		{"SIGTERM", syscall.SIGTERM, []string{"--grandchild"}, true},
		{"SIGTERM agent ignores EOF", syscall.SIGTERM, []string{"--grandchild", "--ignore-eof"}, true},
		{"SIGKILL", syscall.SIGKILL, []string{"--grandchild"}, true},
		{"SIGKILL agent ignores EOF", syscall.SIGKILL, []string{"--grandchild", "--ignore-eof"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			cfg := clientConfig{Mode: "hold", HoldPrompt: "please hang", HoldAction: "wait"}
			marker := withMarker(t, &cfg)
			chain := []string{
				goProxyCmd("go1"),
				nestedCmd(pyProxyCmd("py2"), goProxyCmd("go3")),
				agentCmd("agent", c.flags...),
			}
			rc := startClient(t, ctx, cfg, agentModeArgs(chain...))
			ev := rc.event(t, ctx)
			running := markedProcs(marker)
			// The conductor's direct children are go1, the inner conductor,
			// the agent and the chain's watchdog; deeper are the inner
			// conductor's proxies (py2, go3) and watchdog, and the agent's
			// sleep.
			var direct, deeper, components []proc
			for _, p := range running {
				switch {
				case p.PID == ev.PID:
				case p.PPID == ev.PID:
					direct = append(direct, p)
				default:
					deeper = append(deeper, p)
				}
				if p.PID != ev.PID && !strings.Contains(p.Cmdline, "component-supervisor") {
					components = append(components, p)
				}
			}
			t.Logf("active: conductor %d\ndirect children:\n%sdeeper:\n%s", ev.PID, procList(direct), procList(deeper))
			if len(direct) != 4 || len(components) != 6 {
				t.Errorf("want 4 direct children (go1, the inner conductor, the agent, the chain's watchdog) and 6 processes besides watchdogs (go1, inner conductor, py2, go3, agent, sleep)")
			}

			if err := syscall.Kill(ev.PID, c.sig); err != nil {
				t.Fatalf("signalling the conductor: %v", err)
			}
			// The client returns once the conductor has exited.
			select {
			case <-rc.done:
			case <-boundCtx(ctx, cleanupBound).Done():
				t.Fatalf("the conductor had not exited %v after %s", cleanupBound, c.name)
			}
			s := rc.wait(t)
			t.Logf("conductor exit after %s: %s", c.name, s.exitString())
			if s.Exit == nil || s.Exit.KilledByClient {
				t.Errorf("conductor did not exit by itself: %s", s.exitString())
			}

			if left := waitGone(ctx, cleanupBound, pids(direct)); len(left) > 0 {
				t.Errorf("direct children still running %v after %s: %v", cleanupBound, c.name, left)
			}
			bound := cleanupBound
			if !c.strict {
				bound = 3 * time.Second // observation only
			}
			if left := waitGone(ctx, bound, pids(deeper)); len(left) > 0 {
				var ps []proc
				for _, pid := range left {
					if p, ok := readProc(pid); ok {
						ps = append(ps, p)
					}
				}
				if c.strict {
					t.Errorf("still running %v after %s:\n%s", bound, c.name, procList(ps))
				} else {
					t.Logf("FINDING: %s of the conductor; still running %v later (not asserted):\n%s", c.name, bound, procList(ps))
					killMarked(t, marker)
				}
			} else {
				t.Logf("after %s every process of the tree was gone", c.name)
			}
		})
	}
}

func containsPID(ps []proc, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// boundCtx is ctx bounded by d more; its cancel is left to ctx's end.
func boundCtx(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	context.AfterFunc(c, cancel)
	return c
}
