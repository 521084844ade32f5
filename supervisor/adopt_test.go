//go:build linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestAdopted reads a /proc laid out by hand, for a conductor (40) with a
// component (41, started through Start) and processes reparented to it:
// a tree (43, then 44 and 45 under it), one that has exited (46), a nested
// conductor's watchdog (47), and an exited component that os/exec has yet
// to reap (49). Only what the conductor adopted is its own to reap and to
// kill, and the watchdog is left to finish its sweep. The children are
// found from the conductor's threads' children lists, one of which is out
// of date (48 has left it), or, without such lists, among all processes.
func TestAdopted(t *testing.T) {
	for _, lists := range []bool{true, false} {
		t.Run(fmt.Sprintf("children lists %v", lists), func(t *testing.T) {
			proc, add := fakeProc(t)
			add("1", "1 (init) S 0"+rest)
			add("40", "40 (acp-conductor) S 1"+rest, "acp-conductor", "agent")
			add("41", "41 (agent) S 40"+rest, "agent")
			add("42", "42 (tool) S 41"+rest, "tool")
			add("43", "43 (daemon) S 40"+rest, "daemon")
			add("44", "44 (worker) S 43"+rest, "worker")
			add("45", "45 (sh) S 44"+rest, "sh")
			add("46", "46 (done) Z 40"+rest)
			add("47", "47 (sh) S 40"+rest, "/bin/sh", "-c", waiter, shellName, "c2")
			add("48", "48 (other) S 1"+rest, "other")
			add("49", "49 (proxy) Z 40"+rest)
			if lists {
				for tid, children := range map[string]string{"40": "41 43 48 ", "57": "46 47 49"} {
					dir := filepath.Join(proc, "40", "task", tid)
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, "children"), []byte(children), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			record(41)
			record(49)
			t.Cleanup(func() { forget(41); forget(49) })

			live, zombies := adopted(proc, 40)
			if got := pidsOf(live); !slices.Equal(got, []int{43, 47}) {
				t.Errorf("adopted, alive: %v, want [43 47]", got)
			}
			if !slices.Equal(zombies, []int{46}) {
				t.Errorf("adopted, exited: %v, want [46]", zombies)
			}
			if got := pidsOf(adoptedKin(proc, 40)); !slices.Equal(got, []int{43, 44, 45}) {
				t.Errorf("adoptedKin = %v, want [43 44 45]", got)
			}
		})
	}
}

func pidsOf(ps []process) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.pid)
	}
	slices.Sort(out)
	return out
}

// TestReapAdopted has two children exit: one started through Start, and
// one started otherwise, which is how an adopted process looks. The
// second is reaped; the first is left for Wait, which still gets its exit
// status. (No test here runs in parallel: reapAdopted would take any of
// their children that had exited and not been waited for.)
func TestReapAdopted(t *testing.T) {
	mine := exec.Command("sh", "-c", "exit 3")
	if err := Start(mine); err != nil {
		t.Fatal(err)
	}
	stray := exec.Command("sh", "-c", "exit 4")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	state := func(pid int) string {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if f := statFields(stat); err == nil && len(f) > 0 {
			return string(f[0])
		}
		return "gone"
	}
	for deadline := time.Now().Add(10 * time.Second); state(mine.Process.Pid) != "Z" || state(stray.Process.Pid) != "Z"; {
		if time.Now().After(deadline) {
			t.Fatalf("the children have not exited: %s, %s", state(mine.Process.Pid), state(stray.Process.Pid))
		}
		time.Sleep(time.Millisecond)
	}

	reapAdopted("/proc", os.Getpid())
	if s := state(stray.Process.Pid); s != "gone" {
		t.Errorf("the child not started through Start is %s, want reaped", s)
	}
	var exit *exec.ExitError
	if err := Wait(mine); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Wait = %v, want exit status 3", err)
	}
	if isOurs(mine.Process.Pid) {
		t.Error("the child Wait reaped is still recorded")
	}
}

// TestAdoptedAsPID1: as a container's PID 1, the conductor adopts every
// orphan in the container. At a chain's end it kills those that carry a
// chain's marker (43, and 44 under it), and leaves alone the rest, such as
// a `docker exec`'s background job (50), whose environment has none, and
// one whose environment it may not read (51).
func TestAdoptedAsPID1(t *testing.T) {
	proc, add := fakeProc(t)
	add("1", "1 (acp-conductor) S 0"+rest, "acp-conductor", "serve")
	add("43", "43 (daemon) S 1"+rest, "daemon")
	add("44", "44 (worker) S 43"+rest, "worker")
	add("50", "50 (job) S 1"+rest, "job")
	add("52", "52 (child) S 50"+rest, "child")
	add("51", "51 (root-job) S 1"+rest, "root-job")
	for pid, env := range map[string]string{
		"43": "PATH=/bin\x00" + MarkerEnv + "=c1\x00",
		"44": "PATH=/bin\x00",
		"50": "PATH=/bin\x00HOME=/\x00",
		"52": "PATH=/bin\x00",
	} {
		if err := os.WriteFile(filepath.Join(proc, pid, "environ"), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := pidsOf(adoptedKin(proc, 1)); !slices.Equal(got, []int{43, 44}) {
		t.Errorf("as PID 1, adoptedKin = %v, want [43 44]", got)
	}
	// Not PID 1, every orphan is a chain's: only chains' processes are
	// under the conductor.
	for _, pid := range []string{"43", "50", "51"} {
		os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(pid+" (x) S 40"+rest), 0o644)
	}
	if got := pidsOf(adoptedKin(proc, 40)); !slices.Equal(got, []int{43, 44, 50, 51, 52}) {
		t.Errorf("as a subreaper, adoptedKin = %v, want [43 44 50 51 52]", got)
	}
}

// TestReusedPID: Wait forgets a child just after reaping it, and a child
// started in between may have been given the same PID: that one is still
// ours, not a process to adopt and reap, until it is forgotten in turn.
func TestReusedPID(t *testing.T) {
	const pid = 1 << 22 // above any PID the kernel gives: no real child of ours
	record(pid)         // the first child, reaped by Wait,
	record(pid)         // and a new one given its PID before Wait forgot it
	forget(pid)
	if !isOurs(pid) {
		t.Fatal("a child started under a reaped child's PID is no longer ours once the first is forgotten")
	}
	forget(pid)
	if isOurs(pid) {
		t.Fatal("a PID still ours after each child under it was forgotten")
	}
}
