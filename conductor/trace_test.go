package conductor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/trace"
)

// TestGoldenTrace records the golden chain (editor -> 2 proxies -> agent)
// through a whole turn: initialize, session/new, a prompt with updates, a
// permission request, a file read and an MCP tool call whose server (the
// first proxy) asks the agent a question. The trace, at each detail level,
// is compared with testdata/golden/trace-*.jsons, times set to 0.
func TestGoldenTrace(t *testing.T) {
	for _, detail := range trace.Details {
		t.Run(string(detail), func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			rec := trace.NewRecorder(&out, trace.Options{Detail: detail})
			e := startChain(t, Config{
				Proxies: []Component{fake(t, dir, "proxy-a", "mcp-owner", "ACP_TEST_MCP_SPELLING=id"), fake(t, dir, "proxy-b", "proxy")},
				Agent:   fake(t, dir, "agent", "agent", "ACP_TEST_MCP_TOOL=1"),
				Trace:   rec,
			})
			goldenTurn(t, e)
			if err := e.close(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			got := zeroTimes(t, out.String())
			checkGoldenTrace(t, "trace-"+string(detail)+".jsons", got)
			if detail == trace.Metadata {
				for _, secret := range []string{"remember the milk", "hello", "/notes.txt", `"name":"echo"`} {
					if strings.Contains(got, secret) {
						t.Errorf("a metadata trace holds %q", secret)
					}
				}
			}
		})
	}
}

// goldenTurn drives the turn of TestGoldenTrace from the editor's side.
func goldenTurn(t *testing.T, e *editor) {
	t.Helper()
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hello"}]}}`)
	e.recv() // update: thinking
	perm := e.recvMsg()
	if perm.Method != "session/request_permission" {
		t.Fatalf("want a permission request, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(perm.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	read := e.recvMsg()
	if read.Method != "fs/read_text_file" {
		t.Fatalf("want fs/read_text_file, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"result":{"content":"remember the milk"}}`)
	e.recv() // update: read
	if tool := e.recvMsg(); !strings.Contains(updateText(tool), "tool ran") {
		t.Fatalf("want the tool's answer, got %s", e.seen[len(e.seen)-1])
	}
	if m := e.recvMsg(); !m.IsResponse() || string(m.ID) != "2" {
		t.Fatalf("want the prompt's answer, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`)
}

var tsField = regexp.MustCompile(`"ts":[-+0-9.eE]+`)

// zeroTimes checks that every line of a trace is a JSON object with a time,
// and sets the times to 0.
func zeroTimes(t *testing.T, s string) string {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var e trace.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || !tsField.MatchString(line) {
			t.Fatalf("not a trace event: %s (%v)", line, err)
		}
	}
	return tsField.ReplaceAllString(s, `"ts":0`)
}

// checkGoldenTrace compares a trace with a golden one. The components run
// concurrently, so only what the relay promises is compared: the same
// events, and the same order between each two components in each
// direction.
func checkGoldenTrace(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	g, w := byHop(t, got), byHop(t, string(want))
	same := len(g) == len(w)
	for hop, lines := range w {
		same = same && strings.Join(g[hop], "\n") == strings.Join(lines, "\n")
	}
	if !same {
		t.Errorf("%s: got\n%s\nwant (in any order that keeps each hop's):\n%s", name, got, want)
	}
}

// byHop groups the lines of a trace by their from and to, in order.
func byHop(t *testing.T, s string) map[[2]string][]string {
	t.Helper()
	hops := map[[2]string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var e trace.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a trace event: %s (%v)", line, err)
		}
		hop := [2]string{e.From, e.To}
		hops[hop] = append(hops[hop], line)
	}
	return hops
}
