package injector

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// write creates the file path (and its directories) with the given text.
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "CLAUDE.md"), "root claude")
	write(t, filepath.Join(root, "a", "AGENTS.md"), "a agents")
	write(t, filepath.Join(root, "a", "CLAUDE.md"), "a claude")
	write(t, filepath.Join(root, "a", "b", "c", "notes.txt"), "")
	os.MkdirAll(filepath.Join(root, "d", "CLAUDE.md"), 0o755) // a directory, not a file

	names := []string{"AGENTS.md", "CLAUDE.md"}
	for _, c := range []struct {
		dir, want string
	}{
		{"a", "a/AGENTS.md"},           // both here: the first name wins
		{"a/b/c", "a/AGENTS.md"},       // nearest directory up
		{".", "CLAUDE.md"},             // the second name when the first is absent
		{"d", "CLAUDE.md"},             // a directory of that name does not count
		{"a/b/c/../..", "a/AGENTS.md"}, // unclean paths are cleaned
	} {
		got, ok := Find(filepath.Join(root, c.dir), names)
		if want := filepath.Join(root, c.want); !ok || got != want {
			t.Errorf("Find(%s) = %q, %v; want %q", c.dir, got, ok, want)
		}
	}
	if got, ok := Find(filepath.Join(root, "a", "b"), []string{"NOPE-" + filepath.Base(root) + ".md"}); ok {
		t.Errorf("Find with an absent name = %q", got)
	}
}

func TestReadCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "AGENTS.md")
	write(t, path, "héllo") // é is 2 bytes: h=0, é=1..2, l=3

	got, err := readCapped(path, 100)
	if err != nil || got != "héllo" {
		t.Errorf("under the cap: %q, %v", got, err)
	}
	got, err = readCapped(path, 2) // cuts é in half
	if err != nil || !strings.HasPrefix(got, "h\n\n[The rest of this file is left out") || !utf8.ValidString(got) {
		t.Errorf("cut inside a character: %q, %v", got, err)
	}
	got, err = readCapped(path, 3)
	if err != nil || !strings.HasPrefix(got, "hé\n\n[The rest") {
		t.Errorf("cut after a character: %q, %v", got, err)
	}
}

func TestPrepend(t *testing.T) {
	block := json.RawMessage(`{"type":"text","text":"x"}`)
	for in, want := range map[string]string{
		`[{"type":"text", "text":"a\u00e9<"}]`: `[{"type":"text","text":"x"},{"type":"text", "text":"a\u00e9<"}]`,
		` [ ] `:                                `[{"type":"text","text":"x"} ]`,
	} {
		got, err := prepend(json.RawMessage(in), block)
		if err != nil || string(got) != want || !json.Valid(got) {
			t.Errorf("prepend(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := prepend(json.RawMessage(`{"a":1}`), block); err == nil {
		t.Error("prepend to an object succeeded")
	}
}

// TestSessionsForgotten serves the proxy on pipes, as its conductor would
// drive it: a session set up and then closed (or deleted) leaves no
// directory behind, and a close the agent refuses forgets nothing.
func TestSessionsForgotten(t *testing.T) {
	in := New(nil, 0, nil)
	toProxy, conductorOut := io.Pipe()
	proxyOut, fromProxy := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- in.Proxy().Serve(ctx, toProxy, fromProxy) }()
	defer func() { cancel(); conductorOut.Close(); <-served }()
	lines := bufio.NewScanner(proxyOut)
	// call sends a request from the editor's side and answers what the
	// proxy forwards to its successor with answer, returning the proxy's
	// answer to the request.
	call := func(id int, method, params, answer string) string {
		t.Helper()
		fmt.Fprintf(conductorOut, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		if !lines.Scan() {
			t.Fatalf("%s: the proxy stopped: %v", method, lines.Err())
		}
		var fwd struct{ ID json.RawMessage }
		json.Unmarshal(lines.Bytes(), &fwd)
		fmt.Fprintf(conductorOut, `{"jsonrpc":"2.0","id":%s,%s}`+"\n", fwd.ID, answer)
		if !lines.Scan() {
			t.Fatalf("%s: no answer: %v", method, lines.Err())
		}
		return lines.Text()
	}
	sessions := func() int {
		in.mu.Lock()
		defer in.mu.Unlock()
		return len(in.cwds)
	}
	for i, end := range []string{"session/close", "session/delete"} {
		sid := fmt.Sprintf("s%d", i)
		call(10*i+1, "session/new", `{"cwd":"/tmp","mcpServers":[]}`, `"result":{"sessionId":"`+sid+`"}`)
		if n := sessions(); n != 1 {
			t.Fatalf("%d sessions known after session/new, want 1", n)
		}
		call(10*i+2, end, `{"sessionId":"`+sid+`"}`, `"error":{"code":-32603,"message":"busy"}`)
		if n := sessions(); n != 1 {
			t.Errorf("%s refused: %d sessions known, want 1", end, n)
		}
		call(10*i+3, end, `{"sessionId":"`+sid+`"}`, `"result":{}`)
		if n := sessions(); n != 0 {
			t.Errorf("after %s: %d sessions known, want 0", end, n)
		}
	}
}
