//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// TestLogFileIsStdout: a log or trace file that is the conductor's own
// standard output under a name config cannot judge (a link to /dev/stdout
// or to /proc/self/fd/1, /proc/thread-self/fd/1, the file stdout is
// redirected to, or a link to that) is refused: the reason is on stderr
// and in the answer to the editor's initialize, and stdout carries that
// answer alone.
func TestLogFileIsStdout(t *testing.T) {
	dir := t.TempDir()
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	redirected := filepath.Join(dir, "stdout") // stdout, for the rows that send it to a file
	devStdout := link("dev-stdout", "/dev/stdout")
	for _, tc := range []struct {
		name   string
		args   []string
		toFile bool
	}{
		{"link to /dev/stdout", []string{"--log-file", devStdout}, false},
		{"link to /proc/self/fd/1", []string{"--log-file", link("fd-1", "/proc/self/fd/1")}, false},
		{"/proc/thread-self/fd/1", []string{"--log-file", "/proc/thread-self/fd/1"}, false},
		{"the file stdout goes to", []string{"--log-file", redirected}, true},
		{"a link to that file", []string{"--log-file", link("redirected", redirected)}, true},
		{"trace to a link to /dev/stdout", []string{"--trace", devStdout}, false},
		{"trace to the file stdout goes to", []string{"--trace", redirected, "--log-level", "error"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append(append([]string{"agent"}, tc.args...), shellQuote(demo)+" sample-agent")
			cmd := exec.CommandContext(ctx, binary, args...)
			cmd.Env = cleanEnv()
			cmd.Stdin = strings.NewReader(initialize + "\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if tc.toFile {
				f, err := os.Create(redirected)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdout = f
			}
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("the conductor did not exit: %v", err)
			}
			out := stdout.Bytes()
			if tc.toFile {
				out, _ = os.ReadFile(redirected)
			}
			if err == nil || !strings.Contains(stderr.String(), "is standard output") {
				t.Errorf("exit %v, stderr %q: want a failure saying the file is standard output", err, stderr.String())
			}
			lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
			m, perr := wire.Parse(lines[0])
			if len(lines) != 1 || perr != nil || m.Error == nil || !strings.Contains(string(m.Error), "is standard output") {
				t.Errorf("stdout %q, want only the answer to initialize, an error saying why", out)
			}
		})
	}
	// Logs to /dev/null when stdout is /dev/null too mix with nothing.
	cmd := exec.Command(binary, "agent", "--log-file", os.DevNull, shellQuote(demo)+" sample-agent")
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(initialize + "\n") // stdout: /dev/null
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("logs and stdout both /dev/null: %v\n%s", err, &stderr)
	}
}

// timestamp matches the time a log line of the conductor starts with.
var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)

// TestNestedLog: a conductor run as a proxy of another logs to its stderr
// without a time, which the outer one, logging each of those lines in one
// of its own, gives it: each line has one. Its level stays, said once:
// the outer line gives it and the text loses its own.
func TestNestedLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	samples := shellQuote(demo)
	inner := shellQuote(binary) + " proxy " + shellQuote(samples+" sample-proxy")
	cmd := exec.CommandContext(ctx, binary, "agent", inner, samples+" sample-agent")
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(initialize + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, &stderr)
	}
	var nested int
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if at := timestamp.FindAllStringIndex(line, -1); len(at) != 1 || at[0][0] != 0 {
			t.Errorf("%d times in a log line, want one, first: %q", len(at), line)
		}
		if strings.Contains(line, `"stream": "stderr"`) && strings.Contains(line, "\tINFO\tstarting\t") {
			nested++
		}
	}
	if nested != 1 {
		t.Errorf("%d lines of the inner conductor starting, want 1:\n%s", nested, &stderr)
	}

	// A log file is read by no conductor: its lines keep their time.
	file := filepath.Join(t.TempDir(), "acp.log")
	env := []string{supervisor.ComponentEnv + "=1.1"}
	if r := acp(t, "", env, "proxy", "--log-file", file); r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if data, err := os.ReadFile(file); err != nil || !timestamp.Match(data) {
		t.Errorf("log file %q (%v), want times", data, err)
	}
}
