package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/examples/proxies/context-injector/injector"
	"github.com/acp-conductor/acp-conductor/examples/proxies/internal/chaintest"
)

func TestMain(m *testing.M) { os.Exit(chaintest.Main(m)) }

// TestChain runs context-injector between the SDK editor and the SDK agent,
// which echoes every prompt's text back as updates, so what the agent was
// given can be read from what the editor received. Four sessions, each with
// its own directory, share the one proxy: their instructions must not mix.
func TestChain(t *testing.T) {
	env := chaintest.Setup(t)
	ctx := chaintest.Context(t)
	binary := env.Build(t, "./examples/proxies/context-injector")

	root := t.TempDir()
	agents := "Run the tests with `make check && make lint`.\nNever edit <generated> files. Ünïcode kept."
	write(t, filepath.Join(root, "repo", "AGENTS.md"), agents)
	write(t, filepath.Join(root, "both", "AGENTS.md"), "agents wins")
	write(t, filepath.Join(root, "both", "CLAUDE.md"), "claude loses")
	write(t, filepath.Join(root, "big", "CLAUDE.md"), strings.Repeat("0123456789", 20))
	deep := filepath.Join(root, "repo", "src", "pkg")
	none := filepath.Join(root, "none")
	for _, dir := range []string{deep, none} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The walk goes up past the test's directory; make sure nothing up there
	// would be found.
	if path, ok := injector.Find(none, []string{"AGENTS.md", "CLAUDE.md"}); ok {
		t.Fatalf("%s exists above the test's directory, so the test cannot tell", path)
	}

	script := chaintest.Script{Sessions: []chaintest.ScriptSession{
		{Cwd: deep, Prompts: []string{"first", "second"}},
		{Cwd: filepath.Join(root, "both"), Prompts: []string{"hi"}},
		{Cwd: filepath.Join(root, "big"), Prompts: []string{"hi"}},
		{Cwd: none, Prompts: []string{"plain"}},
	}}
	proxyCmd := chaintest.Quote(binary, "--file", "AGENTS.md", "--file", "CLAUDE.md", "--max-bytes", "120")
	rep := env.RunEditor(t, ctx, script, env.AgentMode(proxyCmd, env.AgentCmd("agent"))...)

	instructions := func(path, text string) string {
		return "Project instructions from " + path + ":\n\n" + text
	}
	truncated := strings.Repeat("0123456789", 12) + "\n\n[The rest of this file is left out: it is longer than 120 bytes.]"
	want := [][]string{
		{instructions(filepath.Join(root, "repo", "AGENTS.md"), agents) + "first",
			instructions(filepath.Join(root, "repo", "AGENTS.md"), agents) + "second"},
		{instructions(filepath.Join(root, "both", "AGENTS.md"), "agents wins") + "hi"},
		{instructions(filepath.Join(root, "big", "CLAUDE.md"), truncated) + "hi"},
		{"plain"},
	}
	if len(rep.Sessions) != len(want) {
		t.Fatalf("got %d sessions, want %d", len(rep.Sessions), len(want))
	}
	for i, s := range rep.Sessions {
		for j, p := range s.Prompts {
			// The agent joins the prompt's text blocks and streams
			// "#i/N <text>" three times.
			if len(p.Updates) != 3 {
				t.Errorf("session %d prompt %q: %d updates, want 3: %q", i, p.Text, len(p.Updates), p.Updates)
				continue
			}
			if got := strings.TrimPrefix(p.Updates[0], "#0/3 "); got != want[i][j] {
				t.Errorf("session %d (%s) prompt %q: the agent was given\n%q\nwant\n%q", i, s.Cwd, p.Text, got, want[i][j])
			}
		}
	}
}

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
