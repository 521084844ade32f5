package mcpbridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdBridge makes a bridge, says where its directory is, serves it and
// waits to be killed.
func holdBridge() {
	b, err := New(Options{})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println(b.dir)
	b.Serve(context.Background(), func(context.Context, *Conn) {})
	os.Exit(0)
}

// TestStaleDirsRemoved kills conductors' bridges with the signals that give
// them no chance to clean up, and starts another: it removes what they
// left, and only that.
func TestStaleDirsRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP, syscall.SIGQUIT} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "ACP_TEST_BRIDGE_HOLD=1", "GOTRACEBACK=none")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		dir, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no directory from the bridge: %v", err)
		}
		dir = strings.TrimSpace(dir)
		cmd.Process.Signal(sig)
		cmd.Wait()
		if _, err := os.Stat(filepath.Join(dir, socketName)); err != nil {
			t.Fatalf("after %v, the bridge left no socket behind: %v", sig, err)
		}
		left = append(left, dir)
	}
	// What must stay: a live bridge's directory; a dead one's that holds
	// a file the bridge never makes; a symlink named like a directory of
	// ours; another program's name.
	live, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	extra := staleDir(t, tmp, 999999999, 1)
	os.WriteFile(filepath.Join(extra, "keep"), nil, 0o600)
	other := filepath.Join(tmp, "acp-conductor-mcpx-1-2-3")
	os.Mkdir(other, 0o700)
	link := filepath.Join(tmp, dirPrefix+"999999999-1-5")
	os.Symlink(extra, link)

	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, dir := range left {
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a killed bridge's directory %s is still there: %v", dir, err)
		}
	}
	for _, dir := range []string{live.dir, extra, filepath.Join(extra, "keep"), other, link} {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
	// The live bridge still works.
	if c, err := net.Dial("unix", live.socket); err != nil {
		t.Errorf("the live bridge's socket: %v", err)
	} else {
		c.Close()
	}
}

// staleDir makes a socket directory for pid and start, as a bridge killed
// outright leaves it: a socket file nobody listens on.
func staleDir(t *testing.T, parent string, pid int, start uint64) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-%d-", dirPrefix, pid, start))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, socketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	return dir
}

// TestStaleJudgement checks each rule of stale on directories made by hand.
func TestStaleJudgement(t *testing.T) {
	tmp := t.TempDir()
	me, myStart := os.Getpid(), processStart(os.Getpid())
	if myStart == 0 {
		t.Skip("no /proc: process start times are unknown here")
	}
	listening := func(dir string) {
		l, err := net.Listen("unix", filepath.Join(dir, socketName))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	old := func(dir string) {
		past := time.Now().Add(-2 * staleAge)
		os.Chtimes(dir, past, past)
	}
	for _, tc := range []struct {
		name  string
		make  func() string
		stale bool
	}{
		{"dead pid", func() string { return staleDir(t, tmp, 999999999, 1) }, true},
		{"pid reused by another process", func() string { return staleDir(t, tmp, me, myStart+1) }, true},
		{"live owner", func() string { return staleDir(t, tmp, me, myStart) }, false},
		{"dead pid, but someone listens", func() string {
			dir := staleDir(t, tmp, 999999999, 1)
			os.Remove(filepath.Join(dir, socketName))
			listening(dir)
			return dir
		}, false},
		{"dead pid, no socket yet", func() string {
			dir := staleDir(t, tmp, 999999999, 1)
			os.Remove(filepath.Join(dir, socketName))
			return dir
		}, false},
		{"dead pid, no socket for long", func() string {
			dir := staleDir(t, tmp, 999999999, 1)
			os.Remove(filepath.Join(dir, socketName))
			old(dir)
			return dir
		}, true},
		{"dead pid, mode 0755", func() string {
			dir := staleDir(t, tmp, 999999999, 1)
			os.Chmod(dir, 0o755)
			return dir
		}, false},
		{"older naming, nobody listens", func() string {
			dir, _ := os.MkdirTemp(tmp, dirPrefix)
			os.Rename(dir, filepath.Join(tmp, dirPrefix+"123456"))
			dir = filepath.Join(tmp, dirPrefix+"123456")
			l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, socketName), Net: "unix"})
			l.SetUnlinkOnClose(false)
			l.Close()
			return dir
		}, true},
		{"older naming, listening", func() string {
			dir := filepath.Join(tmp, dirPrefix+"654321")
			os.Mkdir(dir, 0o700)
			listening(dir)
			return dir
		}, false},
		{"another program's name", func() string {
			dir := filepath.Join(tmp, dirPrefix+"1-2-3-4")
			os.Mkdir(dir, 0o700)
			return dir
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.make()
			if _, got := stale(dir, filepath.Base(dir)); got != tc.stale {
				t.Errorf("stale(%s) = %v, want %v", filepath.Base(dir), got, tc.stale)
			}
		})
	}
	if os.Getuid() == 0 {
		dir := staleDir(t, tmp, 999999999, 1)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, got := stale(dir, filepath.Base(dir)); got {
			t.Error("another user's directory was judged stale")
		}
	}
}
