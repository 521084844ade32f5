package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/testio"
)

// An editor drives a conductor on its stdin and stdout, as an ACP client.
type editor struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte // the conductor's stdout, line by line; closed at its end
	stderr *testio.Buffer
	lastID int
}

// An answer is the answer to one request, with the session/update
// notifications that arrived before it.
type answer struct {
	result  json.RawMessage
	err     json.RawMessage
	updates []json.RawMessage // the update member of each session/update
}

// startEditor starts cmd with its stdin and stdout on the editor and its
// stderr (the conductor's log, with every component's stderr) in a buffer.
func startEditor(t *testing.T, cmd *exec.Cmd) *editor {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	e := &editor{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 100), stderr: &testio.Buffer{}}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(e.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			e.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	return e
}

// request sends a request and waits, until ctx is done, for its answer.
func (e *editor) request(ctx context.Context, method string, params any) answer {
	e.t.Helper()
	e.lastID++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": e.lastID, "method": method, "params": params})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.stdin.Write(append(line, '\n')); err != nil {
		e.t.Fatalf("sending %s: %v", method, err)
	}
	var a answer
	for {
		var line []byte
		var ok bool
		select {
		case line, ok = <-e.lines:
		case <-ctx.Done():
			e.t.Fatalf("no answer to %s: %v", method, ctx.Err())
		}
		if !ok {
			e.t.Fatalf("the conductor closed its output before answering %s", method)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Update json.RawMessage `json:"update"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			e.t.Fatalf("the conductor sent %s: %v", line, err)
		}
		switch {
		case m.Method == "session/update":
			a.updates = append(a.updates, m.Params.Update)
		case m.Method != "":
			// Nothing in these tests asks the editor anything, and no
			// MCP-over-ACP message may reach it: it owns no server.
			e.t.Fatalf("unexpected message from the conductor: %s", line)
		case string(m.ID) != fmt.Sprint(e.lastID):
			e.t.Fatalf("an answer to no request: %s", line)
		default:
			a.result, a.err = m.Result, m.Error
			return a
		}
	}
}

// close closes the conductor's stdin, as an editor ends a chain, reads
// whatever else it writes, and returns how it exited, or ctx's error.
func (e *editor) close(ctx context.Context) error {
	e.stdin.Close()
	for {
		select {
		case line, ok := <-e.lines:
			if !ok {
				return e.wait(ctx)
			}
			e.t.Errorf("unexpected output after stdin closed: %s", line)
		case <-ctx.Done():
			e.cmd.Process.Kill()
			return fmt.Errorf("the conductor did not close its output: %w", ctx.Err())
		}
	}
}

func (e *editor) wait(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		e.cmd.Process.Kill()
		<-done
		return fmt.Errorf("the conductor did not exit: %w", ctx.Err())
	}
}
