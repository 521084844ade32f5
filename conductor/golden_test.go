package conductor

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenTranscript drives editor -> 2 proxies -> agent through a whole
// turn and compares the exact lines every component (and the editor) saw
// with the committed transcripts in testdata/golden.
func TestGoldenTranscript(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "proxy-a", "proxy"), fake(t, dir, "proxy-b", "proxy")},
		Agent:   fake(t, dir, "agent", "agent"),
	})

	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}},"_meta":{"traceparent":"00-abc-def-01"}}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"/work","mcpServers":[],"unknownField":{"kept":[1,2.50,"x"]}}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hello \u00e9"}],"_meta":{"k":"v"}}}`)
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
	e.recv() // prompt response
	e.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`)
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	checkTranscripts(t, e, dir, "", "proxy-a", "proxy-b", "agent")
}

// checkTranscripts compares what the editor and each named component saw
// with testdata/golden/PREFIX+NAME.jsonl.
func checkTranscripts(t *testing.T, e *editor, dir, prefix string, names ...string) {
	t.Helper()
	check := func(name, got string) {
		t.Helper()
		path := filepath.Join("testdata", "golden", prefix+name+".jsonl")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s saw:\n%s\nwant:\n%s", name, got, want)
		}
	}
	check("editor", strings.Join(e.seen, "\n")+"\n")
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		check(name, string(b))
	}
}

// TestGoldenMCPRequestBinding drives the request binding (the TypeScript
// SDK's mcp/message {serverId, requestId}) through 2 proxies: the owner is
// the first proxy, which refuses mcp/connect (so the conductor learns its
// binding), and answers a tool call after a progress notification for the
// same request. The proxy between never sees any of it.
func TestGoldenMCPRequestBinding(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "owner", "mcp-req-owner"), fake(t, dir, "middle", "proxy")},
		Agent:   fake(t, dir, "agent", "mcp-req-agent"),
	})
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	for m := e.recvMsg(); !m.IsResponse(); m = e.recvMsg() {
	}
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkTranscripts(t, e, dir, "mcp-request-", "owner", "middle", "agent")
}

// TestGoldenMCPThinkwell drives the connect binding to a Thinkwell-dialect
// owner (sacp's spelling) through an RFD and a Rust-dialect proxy: its
// acp: URL declaration reaches the native agent as an acp one; the agent's
// mcp/connect, tool call (during which the owner asks the agent a question),
// unknown connection and mcp/disconnect reach the owner as _mcp/* in its
// envelopes, the disconnect as a notification; the proxies in between see
// none of it.
func TestGoldenMCPThinkwell(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{
			fake(t, dir, "owner", "thinkwell", "ACP_TEST_TW_MCP=sacp"),
			fake(t, dir, "middle", "proxy"),
			fake(t, dir, "rust", "proxy", "ACP_TEST_RUST_ONLY=1"),
		},
		Agent: fake(t, dir, "agent", "mcp-agent"),
	})
	mcpReports(e)
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The agent's updates reach the owner along the chain, its MCP
	// messages straight: how they interleave there is timing. The owner's
	// golden file holds what it saw but the updates.
	b, err := os.ReadFile(filepath.Join(dir, "owner.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(line, `"session/update"`) {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "owner-but-updates.txt"), []byte(strings.Join(kept, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	checkTranscripts(t, e, dir, "mcp-thinkwell-", "owner-but-updates", "middle", "rust", "agent")
}
