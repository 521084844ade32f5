package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseComponent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Component
	}{
		{"my-agent", Component{Command: "my-agent"}},
		{"  npx -y some-agent --acp ", Component{Command: "npx", Args: []string{"-y", "some-agent", "--acp"}}},
		{`FOO=1 my-agent --acp 'a b'`, Component{Command: "my-agent", Args: []string{"--acp", "a b"}, Env: map[string]string{"FOO": "1"}}},
		{`Api_Key="x y" lower=z run`, Component{Command: "run", Env: map[string]string{"Api_Key": "x y", "lower": "z"}}},
		{`A=1 A=2 run`, Component{Command: "run", Env: map[string]string{"A": "2"}}},
		{`EMPTY= run`, Component{Command: "run", Env: map[string]string{"EMPTY": ""}}},
		// Only leading words are environment, as in a shell.
		{`run A=1`, Component{Command: "run", Args: []string{"A=1"}}},
		{`1A=x run`, Component{Command: "1A=x", Args: []string{"run"}}},
		// Nothing is expanded: no shell runs the component.
		{`echo $HOME '*' "$(x)" ~`, Component{Command: "echo", Args: []string{"$HOME", "*", "$(x)", "~"}}},
		{`'/opt/my agent/bin' --x=1`, Component{Command: "/opt/my agent/bin", Args: []string{"--x=1"}}},
		{`run 'it'\''s' "a|b" a\ b`, Component{Command: "run", Args: []string{"it's", "a|b", "a b"}}},
		{`run ''`, Component{Command: "run", Args: []string{""}}},
	} {
		got, err := ParseComponent(tc.in)
		if err != nil {
			t.Errorf("ParseComponent(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseComponent(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseComponentErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"FOO=1", "no command after the NAME=value words"},
		{"FOO=1 BAR=2", "no command after the NAME=value words"},
		{`run 'unterminated`, "unbalanced quote"},
		{`run "unterminated`, "unbalanced quote"},
		{`run trailing\`, "unbalanced quote, escape"},
		{`run (x)`, "parenthesis"},
		{`run | other`, "unquoted shell operator at character 5"},
		{`run; rm -rf /`, "unquoted shell operator at character 4"},
		{`run > out`, "unquoted shell operator"},
		{`run &`, "unquoted shell operator"},
		{`''`, "command is required"},
		{"run 'a\x00b'", "argument 1 contains a NUL byte"},
	} {
		_, err := ParseComponent(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseComponent(%q) error = %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

// TestProgramName checks the default names of components run through env
// and runners: the package or script, not the runner.
func TestProgramName(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"ctx-proxy", "--flag"}, "ctx-proxy"},
		{[]string{"/usr/local/bin/agent"}, "agent"},
		{[]string{"env", "X=1", "node", "./passthrough-proxy.mjs"}, "passthrough-proxy"},
		{[]string{"env", "-u", "HOME", "A=b", "my-agent", "--acp"}, "my-agent"},
		{[]string{"npx", "-y", "@zed-industries/claude-agent-acp"}, "claude-agent-acp"},
		{[]string{"npx", "--yes", "@zed-industries/codex-acp@0.3.1", "--acp"}, "codex-acp"},
		{[]string{"npx", "-p", "some-pkg", "tool"}, "tool"},
		{[]string{"bunx", "agent-pkg"}, "agent-pkg"},
		{[]string{"uvx", "--from", "x", "mcp-proxy"}, "mcp-proxy"},
		{[]string{"pipx", "run", "--spec", "x", "acp-agent"}, "acp-agent"},
		{[]string{"pipx", "install", "x"}, "pipx"},
		{[]string{"python3", "-u", "examples/proxy.py"}, "proxy"},
		{[]string{"python3", "-m", "my_proxy"}, "my_proxy"},
		{[]string{"deno", "run", "-A", "agent.ts"}, "agent"},
		{[]string{"node", "--enable-source-maps", "dist/index.js"}, "index"},
		{[]string{"npx"}, "npx"},
		{[]string{"env"}, "env"},
	} {
		if got := programName(tc.words[0], tc.words[1:]); got != tc.want {
			t.Errorf("programName(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestAssignNames(t *testing.T) {
	for _, tc := range []struct {
		comps []*Component
		want  []string
	}{
		{[]*Component{{Command: "ctx-proxy"}, {Command: "/usr/bin/agent"}}, []string{"ctx-proxy", "agent"}},
		{[]*Component{{Command: "npx", Args: []string{"ctx-proxy"}}, {Command: "npx", Args: []string{"-y", "@x/filter"}}, {Command: "my-agent"}},
			[]string{"ctx-proxy", "filter", "my-agent"}},
		{[]*Component{{Command: "node", Args: []string{"proxy.mjs"}}, {Command: "node", Args: []string{"proxy.mjs"}}}, []string{"proxy", "proxy-2"}},
		{[]*Component{{Command: "/bin/acp", Args: []string{"sample-proxy"}}, {Command: "/bin/acp", Args: []string{"sample-agent"}}},
			[]string{"acp-sample-proxy", "acp-sample-agent"}},
		// Explicit names stand; defaults step around them.
		{[]*Component{{Command: "npx"}, {Name: "npx", Command: "x"}, {Command: "npx"}}, []string{"npx-2", "npx", "npx-3"}},
		{[]*Component{{Command: "run"}, {Command: "run"}, {Name: "run-2", Command: "x"}}, []string{"run", "run-3", "run-2"}},
		{[]*Component{{Command: "run", Args: []string{"a"}}, {Command: "run", Args: []string{"a"}}}, []string{"run-a", "run-a-2"}},
		// The conductor's names for peers of its own are not taken.
		{[]*Component{{Command: "/opt/client"}, {Command: "conductor"}, {Command: "mcp:tools"}}, []string{"client-2", "conductor-2", "mcp-tools"}},
	} {
		assignNames(tc.comps)
		var got []string
		for _, c := range tc.comps {
			got = append(got, c.Name)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("names = %q, want %q", got, tc.want)
		}
	}
}
