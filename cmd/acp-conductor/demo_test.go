package main

import (
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/samples"
)

// TestDemo runs the demo end to end: a real conductor process, running the
// sample proxy and sample agent, driven by the sample client.
func TestDemo(t *testing.T) {
	r := acp(t, "", nil, "demo", "--timeout", "30s", "--prompt", "Summarize the README")
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// In order: the prompt as the agent received it, with the proxy's note
	// put in front, then the permission, the file read and the end of turn.
	want := []string{
		"→ session/prompt: Summarize the README\n",
		"← agent: I received your prompt:\n",
		"> " + samples.ProxyNote + "\n",
		"> Summarize the README\n",
		"← session/request_permission for tool call call_1",
		"→ permission: allow-once\n",
		"← fs/read_text_file /demo/project/README.md\n",
		"→ file contents:",
		"← tool call call_1 [completed]",
		"← tool call call_2 [completed]: sample-proxy has passed on 1 prompt(s) in session sess_1.\n",
		"← stop reason: end_turn\n",
		"Demo finished",
	}
	rest := r.stdout
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("transcript lacks, in order, %q\ntranscript:\n%s", w, r.stdout)
		}
		rest = rest[i+len(w):]
	}
	if r.stderr != "" {
		t.Errorf("demo is quiet without --verbose, but wrote to stderr:\n%s", r.stderr)
	}
}

func TestDemoVerbose(t *testing.T) {
	r := acp(t, "", nil, "demo", "--verbose")
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "started component") || strings.Contains(r.stdout, "started component") {
		t.Errorf("with --verbose the conductor's logs belong on stderr\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

func TestDemoTimeout(t *testing.T) {
	r := acp(t, "", nil, "demo", "--timeout", "1ms")
	if r.code == 0 || !strings.Contains(r.stderr, "demo failed:\n  the demo did not finish within --timeout 1ms") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
