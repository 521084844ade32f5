package proxies_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/examples/proxies/internal/chaintest"
)

func TestMain(m *testing.M) { os.Exit(chaintest.Main(m)) }

// TestREADMEChainFile checks that the chain file in README.md is one the
// conductor accepts.
func TestREADMEChainFile(t *testing.T) {
	env := chaintest.Setup(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no yaml block")
	}
	file := filepath.Join(t.TempDir(), "chain.yaml")
	if err := os.WriteFile(file, m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	// The file names programs a user installs first (context-injector with
	// go install, the agent through npx): check its shape, not this PATH.
	out, err := exec.Command(env.Conductor, "validate", "--no-commands", "--config", file).CombinedOutput()
	if err != nil || !bytes.HasPrefix(out, []byte("ok: ")) {
		t.Fatalf("acp-conductor validate: %v\n%s", err, out)
	}
	for _, name := range []string{"context-injector", "permission_policy.py", "transcript-recorder.mjs"} {
		if !bytes.Contains(m[1], []byte(name)) {
			t.Errorf("the README's chain file does not use %s", name)
		}
	}
}

// TestAllThree runs the three example proxies in one chain from a chain file
// shaped like the README's, in front of the SDK agent: the agent gets the
// project's instructions, its permission request is answered by rule without
// reaching the editor, and the transcript, recorded nearest the agent, shows
// both. Then a prompt is cancelled with $/cancel_request, which each proxy
// must pass on under the id it used for the prompt, or the agent would never
// stop. (The proxy library answers the editor -32800 at once; one more prompt
// after it makes the editor wait until the agent's own answer has passed the
// recorder, since the agent answers the cancelled prompt first and every hop
// keeps that order.)
func TestAllThree(t *testing.T) {
	env := chaintest.Setup(t)
	python := chaintest.Python(t)
	ctx := chaintest.Context(t)
	abs := func(path string) string {
		p, err := filepath.Abs(path)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(filepath.Join(project, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(project, "AGENTS.md"), "Use tabs.")
	rules := filepath.Join(dir, "rules.json")
	write(t, rules, `{"rules": [{"title": "acp-it permission*", "choose": "reject_once"}]}`)
	transcript := filepath.Join(dir, "transcript.jsonl")

	chain := map[string]any{
		"name": "examples",
		"proxies": []map[string]any{
			{"name": "context", "command": env.Build(t, "./examples/proxies/context-injector"),
				"args": []string{"--file", "AGENTS.md", "--file", "CLAUDE.md"}},
			{"name": "policy", "command": python,
				"args": []string{abs("permission-policy/permission_policy.py"), "--rules", rules}},
			{"name": "transcript", "command": env.Node,
				"args": []string{abs("transcript-recorder/transcript-recorder.mjs"), "--out", transcript}},
		},
		"agent": map[string]any{"name": "agent", "command": env.Node,
			"args": []string{filepath.Join(env.Peers, "agent.mjs"), "--name", "agent"}},
	}
	yaml, err := json.Marshal(chain) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "chain.yaml")
	write(t, file, string(yaml))

	script := chaintest.Script{Sessions: []chaintest.ScriptSession{
		{Cwd: filepath.Join(project, "src"), Prompts: []string{"ask for permission"}, CancelPrompt: "hang until cancelled", AfterCancel: []string{"still there?"}},
	}}
	rep := env.RunEditor(t, ctx, script, env.Conductor, "agent", "--config", file)

	if len(rep.PermissionRequests) != 0 {
		t.Errorf("the editor was asked %+v; the rule should have answered", rep.PermissionRequests)
	}
	injected := "Project instructions from " + filepath.Join(project, "AGENTS.md") + ":\n\nUse tabs."
	updates := rep.Sessions[0].Prompts[0].Updates
	want := []string{
		"permission-result: selected:reject-once",
		"#0/3 " + injected + "ask for permission",
		"#1/3 " + injected + "ask for permission",
		"#2/3 " + injected + "ask for permission",
	}
	if strings.Join(updates, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent said\n%q\nwant\n%q", updates, want)
	}

	// The transcript shows what the agent was given and what it was told,
	// and that the cancellation reached the agent under the prompt's id.
	data, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	var sawPrompt, sawAnswer bool
	var hangID, cancelID, stopped string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var e struct {
			Direction string `json:"direction"`
			Message   struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
			} `json:"message"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("transcript: %v: %s", err, line)
		}
		m := e.Message
		var p struct {
			Prompt    []struct{ Text string } `json:"prompt"`
			RequestID json.RawMessage         `json:"requestId"`
		}
		json.Unmarshal(m.Params, &p)
		switch {
		case e.Direction == "to_agent" && m.Method == "session/prompt":
			if len(p.Prompt) != 2 || p.Prompt[0].Text != injected {
				t.Errorf("a prompt went to the agent without its instructions in front: %s", m.Params)
				continue
			}
			switch p.Prompt[1].Text {
			case "ask for permission":
				sawPrompt = true
			case "hang until cancelled":
				hangID = string(m.ID)
			}
		case e.Direction == "to_agent" && m.Method == "$/cancel_request":
			cancelID = string(p.RequestID)
		case e.Direction == "to_agent" && bytes.Contains(m.Result, []byte(`"optionId":"reject-once"`)):
			sawAnswer = true
		case e.Direction == "to_client" && m.Method == "" && string(m.ID) == hangID:
			stopped = string(m.Result)
		}
	}
	if !sawPrompt {
		t.Errorf("the transcript has no prompt with the instructions in front:\n%s", data)
	}
	if !sawAnswer {
		t.Errorf("the transcript has no reject-once answer going to the agent:\n%s", data)
	}
	if hangID == "" || cancelID != hangID || stopped != `{"stopReason":"cancelled"}` {
		t.Errorf("prompt %s was cancelled with $/cancel_request for %s, and answered %s; want the prompt's id, and stopReason cancelled:\n%s",
			hangID, cancelID, stopped, data)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
