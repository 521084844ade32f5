//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestEnvNests(t *testing.T) {
	w := &Watch{id: "inner"}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"A=1"}, MarkerEnv + "=inner"},
		{[]string{MarkerEnv + "=outer", "A=1"}, MarkerEnv + "=outer,inner"},
		{[]string{MarkerEnv + "=a", MarkerEnv + "=b"}, MarkerEnv + "=b,inner"},
		{[]string{MarkerEnv + "="}, MarkerEnv + "=inner"},
	} {
		got, _ := w.Env(tc.env)
		if got[len(got)-1] != tc.want {
			t.Errorf("Env(%q) ends with %q, want %q", tc.env, got[len(got)-1], tc.want)
		}
	}
	// Each start gets a marker of its own, after the one around it.
	w = &Watch{id: "inner"}
	for _, tc := range []struct {
		env             []string
		component, want string
	}{
		{[]string{"A=1"}, "inner.1", "inner.1"},
		{[]string{ComponentEnv + "=outer.3"}, "inner.2", "outer.3,inner.2"},
	} {
		got, c := w.Env(tc.env)
		if c != tc.component || !slices.Contains(got, ComponentEnv+"="+tc.want) {
			t.Errorf("Env(%q) = %q, %q; want %s=%s and %q", tc.env, got, c, ComponentEnv, tc.want, tc.component)
		}
	}
}

func TestHasMarker(t *testing.T) {
	env := func(kv ...string) []byte { return []byte(strings.Join(kv, "\x00") + "\x00") }
	for _, tc := range []struct {
		env  []byte
		want bool
	}{
		{env("A=1", MarkerEnv+"=c1"), true},
		{env(MarkerEnv+"=outer,c1", "B=2"), true},
		{env(MarkerEnv + "=c1,inner"), true},
		{env(MarkerEnv + "=c10"), false},
		{env(MarkerEnv + "=xc1"), false},
		{env("X" + MarkerEnv + "=c1"), false},
		{env("A=" + MarkerEnv + "=c1"), false},
		{env(MarkerEnv+"=c1", MarkerEnv+"=other"), false}, // the last one counts
		{nil, false},
	} {
		if got := hasMarker(tc.env, "c1"); got != tc.want {
			t.Errorf("hasMarker(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestSweep starts processes in sessions of their own, as a component's
// helpers that leave its group are: two carry component c1's marker (one
// with a nested conductor's component's after it), as does a nested
// conductor's watchdog, and two do not. Sweep("c1") kills the first two,
// and returns once they are dead; the watchdog is left to its own sweep.
func TestSweep(t *testing.T) {
	// Each one's stdin is a pipe that stays open: the watchdog, a shell,
	// waits in its read builtin, with no child of its own to kill.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Cleanup(func() { w.Close() })
	start := func(args []string, env ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env, cmd.Stdin = append(os.Environ(), env...), r
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		execed(t, cmd, func(env []byte) bool { return len(env) > 0 })
		return cmd
	}
	sleep := []string{"sleep", "1000"}
	helper := start(sleep, ComponentEnv+"=c1")
	nested := start(sleep, ComponentEnv+"=c1,inner.1")
	watchdog := start([]string{"sh", "-c", "read x", shellName}, ComponentEnv+"=c1,inner.1")
	other := start(sleep, ComponentEnv+"=c12")
	unmarked := start(sleep)

	(&Watch{}).Sweep("c1")
	for _, tc := range []struct {
		cmd   *exec.Cmd
		alive bool
	}{{helper, false}, {nested, false}, {watchdog, true}, {other, true}, {unmarked, true}} {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tc.cmd.Process.Pid))
		if liveUserProcess(stat) != tc.alive {
			t.Errorf("process %d, %q %q: alive %v after the sweep, want %v", tc.cmd.Process.Pid, tc.cmd.Args, tc.cmd.Env[len(os.Environ()):], !tc.alive, tc.alive)
		}
	}
}
