package permissionpolicy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/examples/proxies/internal/chaintest"
)

func TestMain(m *testing.M) { os.Exit(chaintest.Main(m)) }

// The SDK agent asks, for a prompt containing "permission", about a tool
// call of kind "other" titled "acp-it permission check", offering
// allow-once (allow_once) and reject-once (reject_once); the SDK client
// answers with the first option. So an answer of reject-once, with the
// client never asked, was the proxy's; allow-once with the client asked was
// the client's.
const title = "acp-it permission check"

// TestChain runs permission_policy.py between the SDK client and the SDK
// agent with different rule files, and checks who answered the agent's
// permission request. The rest of each conversation (a file read by the
// agent, served by the client; a prompt cancelled with session/cancel;
// streamed updates, in order) must pass through the proxy untouched.
func TestChain(t *testing.T) {
	env := chaintest.Setup(t)
	python := chaintest.Python(t)
	script, err := filepath.Abs("permission_policy.py")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		rules       string
		editorAsked bool
		outcome     string
	}{
		{"decided by rule", `{"rules": [
			{"kind": "read", "choose": "allow_once"},
			{"kind": "oth*", "title": "acp-it * check", "choose": "reject_once"}]}`,
			false, "selected:reject-once"},
		{"no rule matches", `{"rules": [{"kind": "execute", "choose": "reject_once"}]}`,
			true, "selected:allow-once"},
		{"rule says ask", `{"rules": [{"title": "acp-it*", "choose": "ask"}, {"choose": "reject_once"}]}`,
			true, "selected:allow-once"},
		{"option not offered", `{"rules": [{"kind": "other", "choose": "allow_always"}]}`,
			true, "selected:allow-once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := chaintest.Context(t)
			rules := filepath.Join(t.TempDir(), "rules.json")
			if err := os.WriteFile(rules, []byte(c.rules), 0o644); err != nil {
				t.Fatal(err)
			}
			policy := chaintest.Quote(python, script, "--rules", rules)
			cfg := chaintest.ClientConfig{
				Prompts:      []string{"ask for permission", "readfile:/virtual/notes.txt"},
				Files:        map[string]string{"/virtual/notes.txt": "notes ✓"},
				CancelPrompt: "hang until cancelled",
			}
			s := env.RunClient(t, ctx, cfg, env.AgentMode(policy, env.AgentCmd("agent"))...)

			prompts := s.Sessions[0].Prompts
			if want := []string{"permission-result: " + c.outcome}; !slices.Equal(prompts[0].Results, want) {
				t.Errorf("the agent's permission request was answered %q, want %q", prompts[0].Results, want)
			}
			if want := []string{"readfile-result: notes ✓"}; !slices.Equal(prompts[1].Results, want) {
				t.Errorf("the agent's file read came back %q, want %q", prompts[1].Results, want)
			}
			switch asked := s.PermissionRequests; {
			case c.editorAsked && (len(asked) != 1 || asked[0].Title != title):
				t.Errorf("the editor was asked %+v, want one request about %q", asked, title)
			case !c.editorAsked && len(asked) != 0:
				t.Errorf("the editor was asked %+v, want nothing: the rule decides", asked)
			}
		})
	}
}

// TestBadRules checks that a mistake in the rule file stops the proxy before
// it serves anything, with the rule named.
func TestBadRules(t *testing.T) {
	python := chaintest.Python(t)
	for rules, want := range map[string]string{
		`{"rules": [{"kind": "read", "choose": "allow"}]}`:                `rule 1: "choose" must be one of`,
		`{"rules": [{"choose": "ask"}, {"tilte": "x", "choose": "ask"}]}`: `rule 2: unknown key 'tilte'`,
		`[]`:       `want an object with a "rules" list`,
		`{"rules"`: `Expecting`,
	} {
		path := filepath.Join(t.TempDir(), "rules.json")
		if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, "permission_policy.py", "--rules", path)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":{}}` + "\n")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("rules %s: %v, output %q; want exit status 2 and %q", rules, err, out, want)
		}
		if strings.Contains(string(out), `"jsonrpc"`) {
			t.Errorf("rules %s: the proxy served anyway: %s", rules, out)
		}
	}
}

// TestExampleRules checks that the rule file shipped as an example loads,
// and that the proxy stops cleanly when its input ends.
func TestExampleRules(t *testing.T) {
	cmd := exec.Command(chaintest.Python(t), "permission_policy.py")
	cmd.Env = append(os.Environ(), "ACP_PERMISSION_RULES=rules.example.json")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "7 rules from rules.example.json") {
		t.Errorf("%v: %s", err, out)
	}
}

// TestCancelKeepsMeta: a $/cancel_request the proxy passes on names the
// request by the proxy's own id, and keeps everything else it carried
// (_meta with W3C trace context, members the proxy does not know), for a
// request from either side.
func TestCancelKeepsMeta(t *testing.T) {
	cmd := exec.Command(chaintest.Python(t), "permission_policy.py", "--rules", "rules.example.json")
	chaintest.CancelKeepsMeta(t, cmd)
}

// TestTopLevelMembersPass: members of a message that JSON-RPC does not
// define go on with it, wrapped or unwrapped, as the README asks of a proxy.
func TestTopLevelMembersPass(t *testing.T) {
	cmd := exec.Command(chaintest.Python(t), "permission_policy.py", "--rules", "rules.example.json")
	chaintest.TopLevelMembersPass(t, cmd)
}
