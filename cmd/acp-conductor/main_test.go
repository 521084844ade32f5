package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/config"
)

// binary is the acp-conductor built for these tests: the commands are tested
// as a user runs them, exit status and streams included. demo is the demo
// program (examples/demo), whose sample-proxy and sample-agent commands make
// the chains of these tests.
var binary, demo string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-conductor-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary, demo = filepath.Join(dir, "acp-conductor"), filepath.Join(dir, "demo")
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../../examples/demo").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building acp-conductor and the demo: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// acp runs the binary with args, stdin and extra environment, bounded in time.
func acp(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %q: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// cleanEnv is the environment without any ACP_CONDUCTOR_ setting the
// developer running the tests may have.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Agent Client Protocol", "Available Commands:", "agent", "proxy", "validate", "Examples:"}},
		{[]string{"agent", "--help"}, []string{"Usage:\n  acp-conductor agent [flags] [PROXY...] AGENT", "Examples:", "--config", "--log-level", "ACP_CONDUCTOR_LOGGING_LEVEL", "--log-format", "--log-file", "--shutdown-grace", "--max-message-bytes", "--name"}},
		{[]string{"proxy", "--help"}, []string{"proxy/initialize", "Examples:", "--config", "--shutdown-grace", "--spin"}},
		{[]string{"serve", "--help"}, []string{"--listen", "Examples:", "--config", "--shutdown-grace", "serve does not spin: it takes no\n--spin"}},
		{[]string{"validate", "--help"}, []string{"--mode", "Examples:", "max_message_bytes:", "env: {API_KEY: abc}", "reported in one pass"}},
		{[]string{"help", "agent"}, []string{"Usage:"}},
	} {
		r := acp(t, "", nil, tc.args...)
		if r.code != 0 {
			t.Errorf("%q: exit %d, stderr:\n%s", tc.args, r.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%q: help lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
	}
	// serve does not spin, and has no flag that would say it does.
	if r := acp(t, "", nil, "serve", "--help"); strings.Contains(r.stdout, "--spin ") {
		t.Errorf("serve --help lists --spin:\n%s", r.stdout)
	}
	// The root help lists every environment variable.
	r := acp(t, "", nil, "--help")
	for _, v := range config.Environment() {
		if !strings.Contains(r.stdout, "\n  "+v.Name+"\n") {
			t.Errorf("--help does not list %s:\n%s", v.Name, r.stdout)
		}
	}
	// The supervisor is a part of the conductor, not a tool to list.
	if r := acp(t, "", nil, "--help"); strings.Contains(r.stdout, "component-supervisor") {
		t.Errorf("top-level help lists the hidden supervisor command:\n%s", r.stdout)
	}
}

// TestUsageRequired: a flag a usage line shows outside brackets reads as
// required, so it must be one with no default.
func TestUsageRequired(t *testing.T) {
	for _, args := range [][]string{{"agent"}, {"proxy"}, {"serve"}, {"validate"}, {"trace", "view"}} {
		help := acp(t, "", nil, append(args, "--help")...).stdout
		_, usage, _ := strings.Cut(help, "Usage:\n  ")
		usage, flags, _ := strings.Cut(usage, "\n")
		depth := 0
		for _, word := range strings.Fields(usage) {
			if depth == 0 && strings.HasPrefix(word, "--") && len(word) > 2 {
				for _, line := range strings.Split(flags, "\n") {
					if strings.Contains(line, " "+word+" ") && strings.Contains(line, "(default ") {
						t.Errorf("%q: usage %q shows %s as required, but it has a default:\n%s", args, usage, word, line)
					}
				}
			}
			depth += strings.Count(word, "[") - strings.Count(word, "]")
		}
	}
}

// TestBare: run with no command, as an editor configured with the bare
// command runs it, the help goes to stderr and the exit says failure:
// stdout carries only the protocol. Asked for, help is on stdout.
func TestBare(t *testing.T) {
	r := acp(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n", nil)
	if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "Available Commands:") || !strings.Contains(r.stderr, "acp-conductor: no command given") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant a failure, no stdout, the help and why on stderr", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--help"}, {"help"}} {
		if r := acp(t, "", nil, args...); r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Available Commands:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0 and the help on stdout", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestExamples walks the command tree as a user finds it, cobra's help and
// completion commands included and hidden commands not, and checks that
// each command's --help shows examples.
func TestExamples(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"--help"})
	root.SetOut(io.Discard)
	if err := root.Execute(); err != nil { // for whatever cobra adds as it runs
		t.Fatal(err)
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		if r := acp(t, "", nil, args...); r.code != 0 || !strings.Contains(r.stdout, "\nExamples:\n") {
			t.Errorf("%q: exit %d, no examples:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestUnknownSubcommand: a command that only groups others (trace,
// completion) refuses a word that names none of them, as the root refuses
// an unknown command, rather than showing its help and exiting 0, which a
// script takes for success; alone, it shows its help.
func TestUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"trace", "vew", "chain.jsons"}, {"completion", "fsh"}} {
		r := acp(t, "", nil, args...)
		want := fmt.Sprintf("unknown command %q for \"acp-conductor %s\"", args[1], args[0])
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, %q on stderr", args, r.code, r.stdout, r.stderr, want)
		}
	}
	// The root says where its usage is, as they do.
	if r := acp(t, "", nil, "agnet"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "unknown command \"agnet\" for \"acp-conductor\"\n\nDid you mean this?\n\tagent\n\nRun 'acp-conductor --help' for usage.") {
		t.Errorf("agnet: exit %d, stdout %q, stderr %q; want exit 1, a suggestion and the usage hint", r.code, r.stdout, r.stderr)
	}
	for _, c := range []string{"trace", "completion"} {
		if r := acp(t, "", nil, c); r.code != 0 || !strings.Contains(r.stdout, "Available Commands:") {
			t.Errorf("%q: exit %d, want 0 and its help:\n%s%s", c, r.code, r.stdout, r.stderr)
		}
	}
	// help too, for a topic it does not know, and not for one it does.
	if r := acp(t, "", nil, "help", "bogus"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, `unknown help topic "bogus"`) {
		t.Errorf("help bogus: exit %d, stdout %q, stderr %q; want exit 1 and the topic refused", r.code, r.stdout, r.stderr)
	}
	if r := acp(t, "", nil, "help", "trace", "view"); r.code != 0 || !strings.Contains(r.stdout, "acp-conductor trace view") {
		t.Errorf("help trace view: exit %d, want 0 and its help:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestArgumentCounts: a command given the wrong number of arguments says
// which command, what it takes and where its usage is, rather than
// cobra's "accepts 1 arg(s), received 0"; a mistyped subcommand gets a
// suggestion, as at the root.
func TestArgumentCounts(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "view"}, "trace view takes one trace FILE, got 0 arguments\nRun 'acp-conductor trace view --help' for usage."},
		{[]string{"trace", "view", "a", "b"}, "trace view takes one trace FILE, got 2 arguments"},
		{[]string{"validate", "a", "b"}, "validate takes at most one chain FILE, got 2 arguments\nRun 'acp-conductor validate --help' for usage."},
		{[]string{"mcp-shim", "x"}, `mcp-shim takes no arguments, got ["x"]`},
		{[]string{"remote-connect"}, "remote-connect takes one URL, got 0 arguments"},
		{[]string{"trace", "veiw", "x"}, "unknown command \"veiw\" for \"acp-conductor trace\"\n\nDid you mean this?\n\tview\n"},
	} {
		r := acp(t, "", nil, tt.args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, tt.want) || strings.Contains(r.stderr, "arg(s)") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := writeFile(t, "chain.yaml", `
name: my-chain
proxies:
  - name: context
    command: ctx-proxy
    env: {API_KEY: abc}
agent:
  name: my-agent
  command: npx
  args: ["-y", "some-agent", "--acp"]
`)
	unknownKey := writeFile(t, "chain.yaml", "agent:\n  command: a\n  agrs: [x]\n")
	for _, tc := range []struct {
		name      string
		env       []string
		args      []string
		code      int
		stdout    string
		stderrHas []string
	}{
		{"good file", nil, []string{"validate", "--no-commands", "--config", good}, 0, "ok: 1 proxy, agent my-agent\n", nil},
		{"file as argument", nil, []string{"validate", "--no-commands", good}, 0, "ok: 1 proxy, agent my-agent\n", nil},
		{"--commands=false", nil, []string{"validate", "--commands=false", good}, 0, "ok: 1 proxy, agent my-agent\n", nil},
		{"programs found", nil, []string{"validate", writeFile(t, "found.yaml", "proxies: [{command: cat}]\nagent: {command: sh, cwd: /}\n")}, 0, "ok: 1 proxy, agent sh\n", nil},
		{"relative cwd", nil, []string{"validate", writeFile(t, "rel.yaml", "agent: {command: sh, cwd: ./}\n")}, 0, "ok: 0 proxies, agent sh\n",
			[]string{`warning: agent "sh" (`, `cwd "./" is relative`}},
		{"command with its arguments", nil, []string{"validate", "--no-commands", writeFile(t, "words.yaml", "agent: {command: npx -y pkg}\n")}, 1, "",
			[]string{`agent "npx -y pkg" (`, `command "npx -y pkg" holds spaces`}},
		{"tilde", nil, []string{"validate", "--no-commands", writeFile(t, "tilde.yaml", "agent: {command: ~/bin/agent, cwd: ~/src}\n")}, 1, "",
			[]string{`command "~/bin/agent": ~ is not expanded`, `cwd "~/src": ~ is not expanded`}},
		{"tab indentation", nil, []string{"validate", writeFile(t, "tabs.yaml", "agent:\n\tcommand: sh\n")}, 1, "",
			[]string{"tabs.yaml:2: indented with a tab"}},
		{"unknown environment variable", []string{"ACP_CONDUCTOR_SHUTDOWN_GRAEC=1s"}, []string{"validate", "--no-commands", good}, 1, "",
			[]string{"ACP_CONDUCTOR_SHUTDOWN_GRAEC names no setting"}},
		{"variables serve and remote components read", []string{"ACP_CONDUCTOR_TOKEN=t", "ACP_CONDUCTOR_REMOTE_TOKEN=t", "ACP_CONDUCTOR_REMOTE_HEADERS={}"},
			[]string{"validate", "--no-commands", good}, 0, "ok: 1 proxy, agent my-agent\n", nil},
		{"unknown key", nil, []string{"validate", "--config", unknownKey}, 1, "",
			[]string{unknownKey + `:3: unknown key "agrs" in agent (did you mean "args"?)`}},
		{"agent in proxy mode", nil, []string{"validate", "--mode", "proxy", "--config", good}, 1, "",
			[]string{good + ":7: agent: not allowed in proxy mode"}},
		{"bad setting in environment", []string{"ACP_CONDUCTOR_LOGGING_FORMAT=xml"}, []string{"validate", good}, 1, "",
			[]string{"from environment variable ACP_CONDUCTOR_LOGGING_FORMAT"}},
		{"missing programs", nil, []string{"validate", good}, 1, "",
			[]string{`proxy "context" (` + good + `:4): command "ctx-proxy" not found in PATH`}},
		{"every problem at once", []string{"ACP_CONDUCTOR_LOGGING_FORMAT=xml"}, []string{"validate", writeFile(t, "many.yaml",
			"proxies:\n  - command: no-such-proxy\n    on_failure: retry\n    agrs: [x]\nagent: {command: sh, on_failure: bypass}\n")}, 1, "",
			[]string{`many.yaml:4: unknown key "agrs" in proxies[0]`, `many.yaml:3: proxies[0].on_failure: invalid policy "retry"`,
				`many.yaml:5: agent.on_failure: "bypass" is for proxies`, "from environment variable ACP_CONDUCTOR_LOGGING_FORMAT",
				`proxy "no-such-proxy" (`, `command "no-such-proxy" not found in PATH`}},
		{"tab indentation and the environment", []string{"ACP_CONDUCTOR_SPIN=5s"}, []string{"validate", writeFile(t, "tabs2.yaml", "agent:\n\tcommand: sh\n")}, 1, "",
			[]string{"tabs2.yaml:2: indented with a tab", "spin: must be at most 1ms"}},
		{"no file", nil, []string{"validate"}, 1, "", []string{"no chain file"}},
		{"missing file", nil, []string{"validate", "/no/such/chain.yaml"}, 1, "", []string{"no such file"}},
		{"bad mode", nil, []string{"validate", "--mode", "client", good}, 1, "", []string{`--mode "client": want agent or proxy`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, "", tc.env, tc.args...)
			if r.code != tc.code || r.stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q; want exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, tc.code, tc.stdout, r.stderr)
			}
			for _, w := range tc.stderrHas {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

// TestValidateReadsOnce: validate reads the chain file once, and no more
// of it than a chain file may hold, so that a file that can be read only
// once (validate <(generate-chain), /dev/stdin) is judged on what it holds,
// as agent --config judges it, and one that never ends is refused as too
// long rather than read until memory runs out.
func TestValidateReadsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		code        int
		stdout      string
		stderrHas   string
	}{
		{"good chain", "agent: {command: sh}\n", 0, "ok: 0 proxies, agent sh\n", ""},
		{"bad chain", "agent: {command: sh, agrs: [x]}\n", 1, "", `/dev/stdin:1: unknown key "agrs" in agent`},
		{"too long", strings.Repeat("#", config.MaxFileBytes+1), 1, "", "/dev/stdin: larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, tc.stdin, nil, "validate", "/dev/stdin")
			if r.code != tc.code || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderrHas) {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, stdout %q, stderr with %q", r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderrHas)
			}
		})
	}
}

// TestChainErrors checks that a chain that cannot run fails at once, with a
// clear message on stderr, a non-zero exit, and nothing at all on stdout.
func TestChainErrors(t *testing.T) {
	noCommand := writeFile(t, "chain.yaml", "proxies:\n  - command: cat\nagent:\n  name: my-agent\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no agent", []string{"agent"}, "no agent given"},
		{"agent program missing", []string{"agent", "cat", "no-such-agent-xyz --acp"}, `agent "no-such-agent-xyz" (argument 2): command "no-such-agent-xyz" not found in PATH`},
		{"agent path missing", []string{"agent", "/no/such/agent"}, `command "/no/such/agent": stat /no/such/agent: no such file or directory`},
		{"agent command missing in file", []string{"agent", "--config", noCommand}, noCommand + ":3: agent.command: required"},
		{"empty component", []string{"agent", ""}, `argument 1: component "": empty`},
		{"unbalanced quote", []string{"agent", "my-agent 'oops"}, "unbalanced quote"},
		{"file and arguments", []string{"agent", "--config", noCommand, "cat"}, "not both"},
		{"bad flag value", []string{"agent", "--shutdown-grace", "soon", "cat"}, `invalid argument "soon" for "--shutdown-grace"`},
		{"unknown flag", []string{"proxy", "--verbose"}, "unknown flag: --verbose\nRun 'acp-conductor proxy --help' for usage."},
		{"proxy mode file with agent", []string{"proxy", "--config", writeFile(t, "c.yaml", "agent: {command: cat}\n")}, "agent: not allowed in proxy mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, "", nil, tc.args...)
			if r.code == 0 {
				t.Errorf("exit 0, want failure")
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout is for the protocol only, but got %q", r.stdout)
			}
		})
	}
}

// TestChainErrorsEveryComponent: a chain on the command line has every
// component checked in one pass: an argument that cannot be read does not
// hide the programs missing from the others.
func TestChainErrorsEveryComponent(t *testing.T) {
	r := acp(t, "", nil, "agent", "no-such-proxy-xyz", "x | y", "no-such-agent-xyz --acp")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{
		`proxy "no-such-proxy-xyz" (argument 1): command "no-such-proxy-xyz" not found in PATH`,
		`argument 2: component "x | y": unquoted shell operator`,
		`agent "no-such-agent-xyz" (argument 3): command "no-such-agent-xyz" not found in PATH`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout is for the protocol only, but got %q", r.stdout)
	}
}

// TestInvalidRequestAnswered: the editor hears of a line that is no
// JSON-RPC 2.0 message under the id of the request it would be, when that
// can be read, so that a caller waiting on that id is answered; and under
// null when it cannot.
func TestInvalidRequestAnswered(t *testing.T) {
	in := `{"id":5,"method":"initialize","params":{}}` + "\n" + `{"id":6,"method":"x"` + "\n"
	r := acp(t, in, nil, "agent", shellQuote(demo)+" sample-agent")
	want := `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}` + "\n" +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"not valid JSON"}}` + "\n"
	if r.stdout != want || r.code != 0 {
		t.Errorf("exit %d, stdout\n%s\nwant exit 0, stdout\n%s\nstderr:\n%s", r.code, r.stdout, want, r.stderr)
	}
}

// TestAgentServes runs a real chain of the demo's samples and checks that
// stdout carries only protocol messages while debug logs go to stderr.
func TestAgentServes(t *testing.T) {
	samples := shellQuote(demo)
	cmd := exec.Command(binary, "agent", samples+" sample-proxy", samples+" sample-agent")
	cmd.Env = append(cleanEnv(), "ACP_CONDUCTOR_LOGGING_LEVEL=debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	// Hang up only once answered: a request still pending then is cancelled.
	out := bufio.NewReader(stdout)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	stdin.Close()
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v, stderr:\n%s", err, &stderr)
	}
	if !strings.Contains(first, `"id":0`) || !strings.Contains(first, `"protocolVersion":1`) {
		t.Errorf("got %q, want the initialize response", first)
	}
	for _, line := range strings.Split(first+string(rest), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			t.Errorf("stdout has a line that is not JSON: %q", line)
		}
	}
	if !strings.Contains(stderr.String(), "DEBUG") || !strings.Contains(stderr.String(), "started component") {
		t.Errorf("debug logs missing from stderr:\n%s", &stderr)
	}
}

// TestNestedConductorSettings: a conductor's ACP_CONDUCTOR_* settings are
// its own, not its components': a nested conductor (acp-conductor proxy)
// neither traces into the outer chain's trace file nor takes its other
// settings, but takes those its component's own env sets.
func TestNestedConductorSettings(t *testing.T) {
	traceFile := filepath.Join(t.TempDir(), "chain.jsons")
	r := acp(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n",
		// The outer one logs at debug too, or it would leave out the
		// nested one's debug lines, which it logs at their own level.
		[]string{"ACP_CONDUCTOR_TRACE_FILE=" + traceFile, "ACP_CONDUCTOR_LOGGING_FORMAT=json", "ACP_CONDUCTOR_LOGGING_LEVEL=debug"},
		"agent", "ACP_CONDUCTOR_LOGGING_LEVEL=debug "+shellQuote(binary)+" proxy", shellQuote(demo)+" sample-agent")
	if r.code != 0 || !strings.Contains(r.stdout, `"id":0,"result"`) {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var nested []string // what the nested conductor logged, through the outer one's log
	debug := false
	for _, line := range strings.Split(r.stderr, "\n") {
		var entry struct{ Level, Msg, Peer string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Peer == "acp-conductor" {
			nested = append(nested, entry.Msg)
			debug = debug || entry.Level == "debug"
		}
	}
	joined := strings.Join(nested, "\n")
	if strings.Contains(joined, "tracing") || strings.Contains(joined, `"level":"`) {
		t.Errorf("the nested conductor took the outer one's trace file or log format:\n%s", joined)
	}
	if !debug {
		t.Errorf("the nested conductor did not log at the debug level its component's env sets:\n%s", joined)
	}
	data, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("trace line is not JSON: %q", line)
		}
	}
}

// TestNestedConductorCause has a proxy fail two conductors deep: an outer
// conductor runs a nested acp-conductor proxy (logging in the console
// format), which runs another (logging json), which runs a proxy that
// dies saying why. Each conductor's failure names as its cause the error
// the one below logged, not its log line quoted again at each level, so
// the outermost still ends with what the proxy said.
func TestNestedConductorCause(t *testing.T) {
	crash := "sh -c " + shellQuote(`read -r line; echo "boom: the crash proxy gave up" >&2; exit 2`)
	inner := "ACP_CONDUCTOR_LOGGING_FORMAT=json " + shellQuote(binary) + " proxy " + shellQuote(crash)
	middle := shellQuote(binary) + " proxy " + shellQuote(inner)
	s := start(t, "agent", "--log-format", "json", middle, shellQuote(demo)+" sample-agent")
	if _, err := io.WriteString(s.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	// Its input stays open: the conductor ends because its proxy failed.
	done := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, s.stdout)
		done <- s.cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the conductor did not end when its nested proxy failed; stderr:\n%s", s.stderr)
	}
	var failed []string
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		var entry struct{ Msg, Error string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "conductor failed" {
			failed = append(failed, entry.Error)
		}
	}
	want := `component "acp-conductor" ended unexpectedly (exit status 1): ` +
		`component "acp-conductor" ended unexpectedly (exit status 1): ` +
		`component "sh" ended unexpectedly (exit status 2): boom: the crash proxy gave up`
	if len(failed) != 1 || failed[0] != want {
		t.Errorf("the conductor failed with %q,\nwant %q; stderr:\n%s", failed, want, s.stderr)
	}
}

// TestNestedConductorLevels: a nested conductor's log lines are logged by
// the outer one at the level each names, not all at info, so that the
// outer log level filters them as the nested one meant: under an outer
// warn, the nested one's warning (an unknown setting) and error (its
// proxy failed) show, and its info ("starting") does not.
func TestNestedConductorLevels(t *testing.T) {
	crash := "sh -c " + shellQuote(`read -r line; exit 2`)
	inner := "ACP_CONDUCTOR_NO_SUCH_SETTING=1 " + shellQuote(binary) + " proxy " + shellQuote(crash)
	r := acp(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n", nil,
		"agent", "--log-level", "warn", "--log-format", "json", inner, shellQuote(demo)+" sample-agent")
	levels := map[string][]string{} // what the nested conductor logged, by the outer line's level
	for _, line := range strings.Split(r.stderr, "\n") {
		var entry struct{ Level, Msg, Peer string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Peer == "acp-conductor" {
			levels[entry.Level] = append(levels[entry.Level], entry.Msg)
		}
	}
	if !slices.ContainsFunc(levels["warn"], func(m string) bool { return strings.Contains(m, "ignored an unknown setting") }) {
		t.Errorf("the nested conductor's warning is not logged at warn; stderr:\n%s", r.stderr)
	}
	if !slices.ContainsFunc(levels["error"], func(m string) bool { return strings.Contains(m, "component failed") }) {
		t.Errorf("the nested conductor's error is not logged at error; stderr:\n%s", r.stderr)
	}
	for level, msgs := range levels {
		for _, m := range msgs {
			if strings.Contains(m, "starting") {
				t.Errorf("the nested conductor's info shows at %s under an outer warn: %q", level, m)
			}
		}
	}
}

func TestLogFile(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "acp.log")
	r := acp(t, "", nil, "proxy", "--log-file", logFile, "--log-format", "json", "--name", "inner")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	var entry struct{ Logger, Msg, Mode string }
	if err := json.Unmarshal([]byte(first), &entry); err != nil || entry.Logger != "inner" || entry.Msg != "starting" || entry.Mode != "proxy" {
		t.Errorf("first log line = %q (%v)", first, err)
	}
}

// TestLogFileUnopenable: a log file that cannot be opened fails the chain
// naming where it was set, as any other bad setting does, with nothing on
// stdout.
func TestLogFileUnopenable(t *testing.T) {
	const path = "/no/such/dir/acp.log"
	chain := writeFile(t, "chain.yaml", "agent: {command: cat}\nlogging:\n  file: "+path+"\n")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		from string
	}{
		{"flag", nil, []string{"agent", "--log-file", path, "cat"}, "(from flag --log-file)"},
		{"variable", []string{"ACP_CONDUCTOR_LOGGING_FILE=" + path}, []string{"agent", "cat"}, "(from environment variable ACP_CONDUCTOR_LOGGING_FILE)"},
		{"chain file", nil, []string{"agent", "--config", chain}, "(from chain file " + chain + ":3)"},
		{"serve", nil, []string{"serve", "--listen", "127.0.0.1:0", "--insecure-no-auth", "--log-file", path, "cat"}, "(from flag --log-file)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, "", tc.env, tc.args...)
			want := "logging.file: open " + path + ": no such file or directory " + tc.from
			if r.code == 0 || !strings.Contains(r.stderr, want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant a failure, no stdout, stderr with %q", r.code, r.stdout, r.stderr, want)
			}
		})
	}
}

// TestTraceFileUnopenable: a trace file that cannot be opened fails the
// chain naming where it was set, as the log file does.
func TestTraceFileUnopenable(t *testing.T) {
	const path = "/no/such/dir/chain.jsons"
	chain := writeFile(t, "chain.yaml", "agent: {command: cat}\ntrace:\n  file: "+path+"\n")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		from string
	}{
		{"flag", nil, []string{"agent", "--trace", path, "cat"}, "(from flag --trace)"},
		{"variable", []string{"ACP_CONDUCTOR_TRACE_FILE=" + path}, []string{"agent", "cat"}, "(from environment variable ACP_CONDUCTOR_TRACE_FILE)"},
		{"chain file", nil, []string{"agent", "--config", chain}, "(from chain file " + chain + ":3)"},
		{"serve", nil, []string{"serve", "--listen", "127.0.0.1:0", "--insecure-no-auth", "--trace", path, "cat"}, "(from flag --trace)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := acp(t, "", tc.env, tc.args...)
			want := "trace.file: open " + path + ": no such file or directory " + tc.from
			if r.code == 0 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr:\n%s\nwant a failure with %q", r.code, r.stderr, want)
			}
		})
	}
}

// started is the binary running with its stdin and stdout piped to the
// test and its stderr kept.
type started struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *bytes.Buffer
}

// start runs the binary with args; the test's end closes its input and kills
// what is left of it.
func start(t *testing.T, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(binary, args...), stderr: new(bytes.Buffer)}
	s.cmd.Env = cleanEnv()
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stdout, err = s.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stdin.Close()
		s.cmd.Process.Kill()
	})
	return s
}

// TestSignalStops checks that SIGTERM, SIGINT and SIGHUP each stop a
// running chain cleanly and promptly, with the client still connected.
func TestSignalStops(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			s := start(t, "agent", "--shutdown-grace", "1s", shellQuote(demo)+" sample-agent")
			cmd, stdin, stdout, stderr := s.cmd, s.stdin, s.stdout, s.stderr
			// Wait until the chain answers, so the signal finds it running.
			fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
			if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
				t.Fatalf("no initialize response: %v\n%s", err, stderr)
			}
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after %v: %v\nstderr:\n%s", sig, err, stderr)
				}
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 15s after %v\nstderr:\n%s", sig, stderr)
			}
		})
	}
}

// A sleeper is a conductor in front of an agent that never answers, with
// a 60s grace, whose log is read a line at a time. Its agent is sleep, or
// the agent given.
type sleeper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
	logs   *bufio.Scanner
	drain  sync.Once // the rest of the log, read once waitLog is done
}

func startSleeper(t *testing.T, agent ...string) *sleeper {
	t.Helper()
	agent = append(agent, "sleep 1000")
	s := &sleeper{cmd: exec.Command(binary, "agent", "--shutdown-grace", "60s", "--log-level", "debug", agent[0])}
	s.cmd.Env = cleanEnv()
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stdout, err = s.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stderr, err = s.cmd.StderrPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stdin.Close(); s.cmd.Process.Kill() })
	s.logs = bufio.NewScanner(s.stderr)
	s.waitLog(t, "started component")
	return s
}

// waitLog returns the first line logged from now on that holds substr.
func (s *sleeper) waitLog(t *testing.T, substr string) string {
	t.Helper()
	for s.logs.Scan() {
		if strings.Contains(s.logs.Text(), substr) {
			return s.logs.Text()
		}
	}
	t.Fatalf("the conductor never logged %q", substr)
	return ""
}

// drainLog reads the rest of the log, so that the conductor never waits
// to write it.
func (s *sleeper) drainLog() {
	s.drain.Do(func() { go io.Copy(io.Discard, s.stderr) })
}

// exits checks that the conductor exits cleanly within 15s, long before
// its grace period would end.
func (s *sleeper) exits(t *testing.T, after string) {
	t.Helper()
	s.drainLog()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after %s, with a 60s grace period", after)
	}
}

// exitLog checks that the conductor exits cleanly within 15s, long before
// its grace period would end, and returns the rest of its log.
func (s *sleeper) exitLog(t *testing.T, after string) string {
	t.Helper()
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for s.logs.Scan() {
			b.WriteString(s.logs.Text() + "\n")
		}
		rest <- b.String()
	}()
	var log string
	select {
	case log = <-rest: // stderr ends as the conductor exits
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after %s, with a 60s grace period", after)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, log)
	}
	return log
}

// TestSecondSignal sends SIGTERM while a request is in flight to an agent
// that will never answer, with a long grace period, then SIGTERM again:
// the second skips the drain, the request is answered with an error, and
// the conductor exits long before the grace period ends.
func TestSecondSignal(t *testing.T) {
	s := startSleeper(t)
	fmt.Fprintln(s.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitLog(t, "draining")
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.drainLog()
	answer := make(chan string, 1)
	go func() { line, _ := bufio.NewReader(s.stdout).ReadString('\n'); answer <- line }()
	select {
	case line := <-answer:
		if !strings.Contains(line, `"id":0`) || !strings.Contains(line, `"error"`) {
			t.Errorf("initialize answered %q, want an error", line)
		}
		// The first signal's cause, as the editor hears it.
		if want := "terminated (another one stops at once)"; !strings.Contains(line, want) {
			t.Errorf("initialize answered %q, want it to say %q", line, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer 15s after the second SIGTERM")
	}
	s.exits(t, "the second SIGTERM")
}

// TestSignalAfterInputEnded: a signal that comes after the editor closed
// its input stops the conductor at once, and the log names the signal as
// why, not with what a first signal tells the editor ("another one stops
// at once"): this one did.
func TestSignalAfterInputEnded(t *testing.T) {
	s := startSleeper(t)
	s.stdin.Close()
	s.waitLog(t, "draining")
	s.cmd.Process.Signal(syscall.SIGTERM)
	line := s.waitLog(t, "stopping at once")
	if want := `told to stop after the client's input ended	{"why": "terminated"}`; !strings.HasSuffix(line, want) {
		t.Errorf("logged %q, want it to end %q", line, want)
	}
	s.exits(t, "SIGTERM, its input ended")
}

// TestSignalThenInputEnded is TestSignalAfterInputEnded the other way
// round: acpx's 100 ms between closing the conductor's stdin and its
// SIGTERM squeezed to nothing, or a Ctrl-C that reaches editor and
// conductor, where the editor dies. Once both have happened the conductor
// stops at once, whichever came first: with a request in flight, which
// the editor, still reading, hears answered with an error, and with none,
// the agent ignoring the end of its input as Codex does.
func TestSignalThenInputEnded(t *testing.T) {
	// The agent says when it has the request, so that the signal finds it
	// in flight, or when its input ended, and then ignores its input.
	const agent = `sh -c 'read -r line; echo read it >&2; exec sleep 1000'`
	for _, inFlight := range []bool{true, false} {
		t.Run(fmt.Sprintf("inFlight=%v", inFlight), func(t *testing.T) {
			s := startSleeper(t, agent)
			answer := make(chan string, 1)
			if inFlight {
				fmt.Fprintln(s.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
				go func() { line, _ := bufio.NewReader(s.stdout).ReadString('\n'); answer <- line }()
				s.waitLog(t, "read it")
			}
			s.cmd.Process.Signal(syscall.SIGTERM)
			if line := s.waitLog(t, "draining"); inFlight && !strings.Contains(line, `"inFlight": 1`) {
				t.Errorf("logged %q, want the request in flight", line)
			}
			if !inFlight {
				// Its input closed: the chain waits for it to exit.
				s.waitLog(t, "read it")
			}
			s.stdin.Close()
			log := s.exitLog(t, "its input ended after SIGTERM")
			if want := "stopping at once: the client's input ended after it was told to stop\t{\"why\": \"terminated\"}\n"; !strings.Contains(log, want) {
				t.Errorf("log:\n%s\nwant a line ending %q", log, want)
			}
			if want := "sh was still running when the conductor was told to stop at once"; !strings.Contains(log, want) {
				t.Errorf("log:\n%s\nwant an outcome saying %q", log, want)
			}
			if inFlight {
				if line := <-answer; !strings.Contains(line, `"id":0`) || !strings.Contains(line, `"error"`) {
					t.Errorf("initialize answered %q, want an error", line)
				}
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/usr/bin/acp-conductor", "/tmp/my dir/acp", "it's", `a"b\c`, "$HOME", "a|b", ""} {
		c, err := config.ParseComponent(shellQuote(s) + " sample-agent")
		if s == "" {
			if err == nil {
				t.Errorf("empty command accepted")
			}
			continue
		}
		if err != nil || c.Command != s || len(c.Args) != 1 {
			t.Errorf("shellQuote(%q) = %s: parsed back as %+v, %v", s, shellQuote(s), c, err)
		}
	}
}

// shellQuote quotes s as one word for a command-line component.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
