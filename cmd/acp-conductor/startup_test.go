package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const initRequest = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n"

// TestStartupErrorsReachEditor checks that a chain that cannot start answers
// the editor's first request with a JSON-RPC error that names the cause,
// writes the cause to the configured log file, and exits 1.
func TestStartupErrorsReachEditor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A FIFO nothing reads: opening it to write would wait for a reader.
	fifo := filepath.Join(dir, "trace.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string // in the error message
	}{
		{"program not in PATH", nil, []string{"agent", "cat", "no-such-agent-xyz --acp"}, []string{"no-such-agent-xyz", "not found in PATH"}},
		{"missing cwd", nil, []string{"agent", "--config", writeFile(t, "cwd.yaml", "agent: {command: cat, cwd: /no/such/dir}\n")}, []string{"/no/such/dir", "working directory"}},
		{"bad environment value", []string{"ACP_CONDUCTOR_SHUTDOWN_GRACE=soon"}, []string{"agent", "cat"}, []string{"ACP_CONDUCTOR_SHUTDOWN_GRACE", "soon"}},
		{"bad flag value", nil, []string{"agent", "--shutdown-grace", "soon", "cat"}, []string{"invalid argument", "soon", "--shutdown-grace"}},
		{"unknown flag", nil, []string{"proxy", "--log-levle", "debug"}, []string{"acp-conductor proxy: unknown flag: --log-levle"}},
		{"bad chain file", nil, []string{"agent", "--config", writeFile(t, "bad.yaml", "agent: {command: cat\n")}, []string{"bad.yaml"}},
		{"cannot exec", nil, []string{"agent", "--config", writeFile(t, "exec.yaml", "agent: {name: locked, command: "+notExec+"}\n")}, []string{"locked", "not executable"}},
		{"dies before answering", nil, []string{"agent", "sh -c 'echo going away >&2; exit 3'"}, []string{`sh`, "exit status 3"}},
		{"trace cannot be written", nil, []string{"agent", "--trace", "/no/such/dir/t.jsonl", "cat"}, []string{"/no/such/dir/t.jsonl"}},
		{"trace is a FIFO nothing reads", nil, []string{"agent", "--trace", fifo, "cat"}, []string{fifo, "nothing reads"}},
		{"trace viewer cannot listen", nil, []string{"agent", "--trace-serve", taken, "cat"}, []string{taken, "in use by another program"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "acp.log")
			r := acp(t, initRequest, append(tc.env, "ACP_CONDUCTOR_LOGGING_FILE="+logFile), tc.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			var resp struct {
				ID    json.RawMessage
				Error *struct {
					Code    int
					Message string
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || string(resp.ID) != "0" || resp.Error == nil {
				t.Fatalf("stdout %q: want the error answering initialize (%v)\nstderr: %s", r.stdout, err, r.stderr)
			}
			logged, _ := os.ReadFile(logFile)
			for _, w := range tc.want {
				if !strings.Contains(resp.Error.Message, w) && !strings.Contains(r.stdout, w) {
					t.Errorf("the editor's error %q lacks %q", r.stdout, w)
				}
				if !strings.Contains(string(logged), w) {
					t.Errorf("the log file lacks %q:\n%s", w, logged)
				}
			}
		})
	}
}

// TestStartupErrorAnswersBatch: a chain that cannot start answers the
// requests of a batch that comes first, together in a batch, as a running
// chain would, rather than leaving them unanswered and waiting for a
// request that comes alone.
func TestStartupErrorAnswersBatch(t *testing.T) {
	in := `[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}},{"jsonrpc":"2.0","id":"b","method":"authenticate"}]` + "\n"
	r := acp(t, in, nil, "agent", "no-such-agent-xyz")
	var resp []struct {
		ID    json.RawMessage
		Error *struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || len(resp) != 2 {
		t.Fatalf("exit %d, stdout %q: want a batch of two errors (%v)\nstderr: %s", r.code, r.stdout, err, r.stderr)
	}
	for i, id := range []string{`0`, `"b"`} {
		if string(resp[i].ID) != id || resp[i].Error == nil || !strings.Contains(resp[i].Error.Message, "no-such-agent-xyz") {
			t.Errorf("answer %d: %s; want an error naming no-such-agent-xyz under id %s", i, r.stdout, id)
		}
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
}

// TestStartupErrorAnswersFlawedRequest: a chain that cannot start answers
// a first request that a running chain would refuse under its id (no
// "jsonrpc") with why the chain did not start; a line with no id to answer
// gets -32700 under null, with why too, and the next request its answer.
// TestStartFailureAnswersLongRequest has one longer than the limit.
func TestStartupErrorAnswersFlawedRequest(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ids      []string // of the answers, in order
	}{
		{"no jsonrpc", `{"id":7,"method":"initialize","params":{}}` + "\n", []string{`7`}},
		{"not JSON, then a request", "hello\n" + initRequest, []string{`null`, `0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, tc.in, nil, "agent", "no-such-agent-xyz")
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != len(tc.ids) {
				t.Fatalf("exit %d, stdout %q: want %d answers\nstderr: %s", r.code, r.stdout, len(tc.ids), r.stderr)
			}
			for i, id := range tc.ids {
				var resp struct {
					ID    json.RawMessage
					Error *struct{ Message string }
				}
				if err := json.Unmarshal([]byte(lines[i]), &resp); err != nil || string(resp.ID) != id ||
					resp.Error == nil || !strings.Contains(resp.Error.Message, "no-such-agent-xyz") {
					t.Fatalf("exit %d, answer %q: want an error naming no-such-agent-xyz under id %s (%v)\nstderr: %s", r.code, lines[i], id, err, r.stderr)
				}
			}
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
		})
	}
}

// TestLogFileFIFO: a log file that is a FIFO nothing reads is refused at
// once, as the trace's is, and the editor told why; opening it would wait
// for a reader, past every signal.
func TestLogFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "log.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := acp(t, initRequest, nil, "agent", "--log-file", fifo, "cat")
	var resp struct {
		ID    json.RawMessage
		Error *struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || string(resp.ID) != "0" || resp.Error == nil ||
		!strings.Contains(resp.Error.Message, "nothing reads") {
		t.Fatalf("exit %d, stdout %q: want an error saying the FIFO has no reader (%v)\nstderr: %s", r.code, r.stdout, err, r.stderr)
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
}

// TestFailureOutcome: the log's last word on a chain stopped by a failed
// component says so, rather than that every component exited when its
// input closed, which the failed one did not.
func TestFailureOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"agent alone", []string{"agent", "sh -c 'exit 3'"}, "stopped after sh failed\t"},
		{"behind a proxy", []string{"agent", "cat", "sh -c 'exit 3'"}, "stopped after sh failed: the other components exited after their input closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, initRequest, nil, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "every component exited") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}
