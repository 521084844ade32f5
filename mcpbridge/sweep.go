package mcpbridge

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The socket directory is named for the process that made it, so that a
// conductor starting later can tell whether it is still in use:
//
//	acp-conductor-mcp-<pid>-<start>-<random>
//
// where start is the process's start time in clock ticks since boot (0
// where /proc does not say), which tells a live owner from a process that
// got its pid later. A conductor killed outright (SIGKILL, or SIGHUP and
// SIGQUIT where they are not handled) cannot remove its directory; New
// removes those whose owner is gone.
const dirPrefix = "acp-conductor-mcp-"

// socketName is the bridge's socket in its directory.
const socketName = "bridge.sock"

// maxSocketPath is the longest path a Unix socket can have everywhere:
// sun_path holds 108 bytes on Linux and 104 on macOS and the BSDs, the
// terminating NUL included.
const maxSocketPath = 103

// socketParents are where socket directories are made, in order: the
// temporary directory, or /tmp when that one's path is too long for a
// socket or it cannot be written.
func socketParents() []string {
	parents := []string{os.TempDir()}
	if filepath.Clean(parents[0]) != "/tmp" {
		parents = append(parents, "/tmp")
	}
	return parents
}

// socketDir creates the bridge's private directory and names its socket.
// The directory is made 0700, so only this user can reach the socket (the
// token then tells declarations apart).
func socketDir() (dir, socket string, err error) {
	pattern := fmt.Sprintf("%s%d-%d-", dirPrefix, os.Getpid(), processStart(os.Getpid()))
	for _, parent := range socketParents() {
		if dir, err = os.MkdirTemp(parent, pattern); err != nil {
			continue
		}
		socket = filepath.Join(dir, socketName)
		if len(socket) <= maxSocketPath {
			return dir, socket, nil
		}
		os.RemoveAll(dir)
		err = fmt.Errorf("socket path %s is longer than %d bytes", socket, maxSocketPath)
	}
	return "", "", err
}

// staleAge is how old a directory without a socket must be before it is
// taken for a leftover: its owner may be between making it and listening.
const staleAge = time.Minute

// sweep removes the socket directories that conductors which are gone
// left behind in the socket parents. It only touches directories of this
// user, named as socketDir names them, mode 0700, and holding nothing but
// the socket; and only when their owner's pid is dead or now belongs to a
// process started at another time, and nothing listens on their socket (a
// last check that holds even for an owner in another pid namespace).
// Directories of an older naming, without a pid, are judged by the socket
// alone.
func sweep(log *zap.Logger) {
	for _, parent := range socketParents() {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), dirPrefix) {
				continue
			}
			dir := filepath.Join(parent, e.Name())
			if why, ok := stale(dir, e.Name()); ok {
				if err := removeStale(dir); err != nil {
					log.Debug("could not remove a stale MCP bridge directory", zap.String("dir", dir), zap.Error(err))
					continue
				}
				log.Debug("removed a stale MCP bridge directory", zap.String("dir", dir), zap.String("why", why))
			}
		}
	}
}

// stale reports whether dir, named name, is a leftover, and why.
func stale(dir, name string) (string, bool) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Getuid() {
		return "", false // another user's: never ours to judge
	}
	why := "its owner is gone"
	if pid, start, ok := parseDirName(name); ok {
		if alive(pid, start) {
			return "", false
		}
	} else if !oldDirName(name) {
		return "", false
	} else {
		why = "an older conductor's, and nothing listens on it"
	}
	sock := filepath.Join(dir, socketName)
	si, err := os.Lstat(sock)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Its owner died before listening, or is about to listen.
		if time.Since(fi.ModTime()) < staleAge {
			return "", false
		}
		return why, true
	case err != nil || si.Mode().Type() != fs.ModeSocket:
		return "", false
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		c.Close() // someone listens: the owner lives, wherever it is
		return "", false
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return "", false
	}
	return why, true
}

// removeStale removes a stale directory's socket, then the directory if
// that left it empty: anything else in it stays, and so does it.
func removeStale(dir string) error {
	if err := os.Remove(filepath.Join(dir, socketName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Remove(dir)
}

// parseDirName returns the pid and start time a directory's name holds.
func parseDirName(name string) (pid int, start uint64, ok bool) {
	parts := strings.Split(strings.TrimPrefix(name, dirPrefix), "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	// Spelt as socketDir spells them, or another's name ("+5", "05")
	// would pass for the bridge of the process it names.
	if parts[0] != strconv.Itoa(pid) || parts[1] != strconv.FormatUint(start, 10) {
		return 0, 0, false
	}
	return pid, start, true
}

// oldDirName reports whether name is of the naming before pids: the prefix
// and os.MkdirTemp's digits.
func oldDirName(name string) bool {
	rest := strings.TrimPrefix(name, dirPrefix)
	return rest != "" && !slices.ContainsFunc([]byte(rest), func(c byte) bool { return c < '0' || c > '9' })
}

// alive reports whether pid is a live process started at start (when both
// that and the process's start time are known).
func alive(pid int, start uint64) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if now := processStart(pid); start != 0 && now != 0 && now != start {
		return false // the pid was given to another process since
	}
	return true
}

// processStart returns when pid started, in clock ticks since boot, from
// /proc/<pid>/stat; 0 where that cannot be read.
func processStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that count come after its last ')'. starttime is field 22
	// of the whole line, the 20th after the name.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return start
}
