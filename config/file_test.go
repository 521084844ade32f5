package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/conductor"
)

func TestParseFullFile(t *testing.T) {
	data, err := os.ReadFile("testdata/chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("chain.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := f.Check(conductor.AgentMode); err != nil {
		t.Errorf("Check(agent): %v", err)
	}
	if f.Name != "my-chain" || len(f.Proxies) != 2 || f.Agent == nil {
		t.Fatalf("got name %q, %d proxies, agent %v", f.Name, len(f.Proxies), f.Agent)
	}
	p := f.Proxies[0]
	if p.Name != "context" || p.Command != "ctx-proxy" || strings.Join(p.Args, " ") != "--flag x" || p.Cwd != "/tmp" {
		t.Errorf("proxy 0 = %+v", p)
	}
	// Environment names must keep their case, which viper would fold.
	if p.Env["API_KEY"] != "abc" || p.Env["lower_case"] != "kept" || len(p.Env) != 2 {
		t.Errorf("proxy 0 env = %v", p.Env)
	}
	if p.Origin != "chain.yaml:4" || f.Proxies[1].Origin != "chain.yaml:10" || f.Agent.Origin != "chain.yaml:12" {
		t.Errorf("origins = %q, %q, %q", p.Origin, f.Proxies[1].Origin, f.Agent.Origin)
	}
	if f.Logging != (Logging{Level: "debug", Format: "json"}) || f.ShutdownGrace != 5*time.Second || f.MaxMessageBytes != 1<<20 || f.Spin != 20*time.Microsecond {
		t.Errorf("settings = %+v %v %d %v", f.Logging, f.ShutdownGrace, f.MaxMessageBytes, f.Spin)
	}
}

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		mode       conductor.Mode
		check      func(*testing.T, *File)
	}{
		{"empty file, proxy mode", "", conductor.ProxyMode, func(t *testing.T, f *File) {
			if len(f.Proxies) != 0 || f.Agent != nil {
				t.Errorf("got %+v", f)
			}
		}},
		{"comments only, proxy mode", "# nothing yet\n", conductor.ProxyMode, nil},
		{"agent only", "agent: {command: my-agent}\n", conductor.AgentMode, func(t *testing.T, f *File) {
			if f.Agent.Command != "my-agent" {
				t.Errorf("agent = %+v", f.Agent)
			}
		}},
		{"empty proxy list", "proxies: []\nagent:\n  command: a\n", conductor.AgentMode, nil},
		{"scalars become strings", "agent:\n  command: a\n  args: [--port, 8080, true]\n  env: {PORT: 8080}\n", conductor.AgentMode, func(t *testing.T, f *File) {
			if strings.Join(f.Agent.Args, " ") != "--port 8080 true" || f.Agent.Env["PORT"] != "8080" {
				t.Errorf("agent = %+v", f.Agent)
			}
		}},
		{"same command twice without names", "proxies:\n  - command: npx\n  - command: npx\n", conductor.ProxyMode, nil},
		{"explicit stderr log file", "logging: {file: \"\"}\n", conductor.ProxyMode, nil},
		{"durations written as a bare 0", "spin: 0\nmcp_http_idle_timeout: 0x0\n", conductor.ProxyMode, func(t *testing.T, f *File) {
			if f.Spin != 0 || f.MCPHTTPIdle != 0 || f.nodes.line("spin") != 1 {
				t.Errorf("spin %v (line %d), mcp_http_idle_timeout %v; want both 0", f.Spin, f.nodes.line("spin"), f.MCPHTTPIdle)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("chain.yaml", []byte(tc.yaml))
			if err == nil {
				err = f.Check(tc.mode)
			}
			if err != nil {
				t.Fatalf("unexpected problems:\n%v", err)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	const agent = "agent:\n  command: a\n"
	for _, tc := range []struct {
		name, yaml string
		mode       conductor.Mode
		want       []string // each must appear in the problems
	}{
		{"unknown top-level key", "nmae: x\n" + agent, conductor.AgentMode,
			[]string{`chain.yaml:1: unknown key "nmae"`, `did you mean "name"?`}},
		{"unknown component key", "proxies:\n  - name: p\n    comand: x\n" + agent, conductor.AgentMode,
			[]string{`chain.yaml:3: unknown key "comand" in proxies[0] (did you mean "command"?); known keys: name, command, args, env, cwd`}},
		{"a key in the singular", "proxy:\n  - command: x\n" + agent, conductor.AgentMode,
			[]string{`chain.yaml:1: unknown key "proxy" (did you mean "proxies"?)`}},
		{"unknown logging key", agent + "logging:\n  lvl: info\n", conductor.AgentMode,
			[]string{`chain.yaml:4: unknown key "lvl" in logging`}},
		{"missing proxy command", "proxies:\n  - name: p\n" + agent, conductor.AgentMode,
			[]string{`chain.yaml:2: proxies[0].command: required`}},
		{"missing agent command", "agent:\n  name: a\n  args: [x]\n", conductor.AgentMode,
			[]string{`chain.yaml:1: agent.command: required`}},
		{"null agent", "agent:\n", conductor.AgentMode,
			[]string{`chain.yaml:1: agent: needs at least a command`}},
		{"no agent in agent mode", "proxies: []\n", conductor.AgentMode,
			[]string{`chain.yaml: agent: required in agent mode`}},
		{"agent in proxy mode", "proxies: []\n" + agent, conductor.ProxyMode,
			[]string{`chain.yaml:2: agent: not allowed in proxy mode`}},
		{"bad level", agent + "logging: {level: verbose}\n", conductor.AgentMode,
			[]string{`chain.yaml:3: logging.level: invalid level "verbose": want one of debug, info, warn, error`}},
		{"bad format", agent + "logging:\n  format: text\n", conductor.AgentMode,
			[]string{`chain.yaml:4: logging.format: invalid format "text"`}},
		{"log to stdout", agent + "logging:\n  file: /dev/stdout\n", conductor.AgentMode,
			[]string{`chain.yaml:4: logging.file: "/dev/stdout" is standard output`}},
		{"duplicate names", "proxies:\n  - {name: x, command: a}\n  - {name: x, command: b}\n", conductor.ProxyMode,
			[]string{`chain.yaml:3: proxies[1].name: "x" is already the name of proxies[0] (line 2)`}},
		{"agent name clashes with proxy", "proxies:\n  - {name: x, command: a}\nagent: {name: x, command: b}\n", conductor.AgentMode,
			[]string{`chain.yaml:3: agent.name: "x" is already the name of proxies[0]`}},
		{"reserved name", "proxies:\n  - {name: client, command: a}\n", conductor.ProxyMode,
			[]string{`chain.yaml:2: proxies[0].name: "client" is the conductor's name for a peer of its own`}},
		{"empty name", "proxies:\n  - {name: '', command: a}\n", conductor.ProxyMode,
			[]string{`chain.yaml:2: proxies[0].name: empty`}},
		{"negative grace", agent + "shutdown_grace: -1s\n", conductor.AgentMode,
			[]string{`chain.yaml:3: shutdown_grace: must be positive, got -1s`}},
		{"zero grace", agent + "shutdown_grace: 0s\n", conductor.AgentMode,
			[]string{`chain.yaml:3: shutdown_grace: must be positive, got 0s`}},
		{"grace without unit", agent + "shutdown_grace: 2\n", conductor.AgentMode,
			[]string{`chain.yaml:3: shutdown_grace: want a duration such as 2s or 500ms, got a number ("2")`}},
		{"grace not a duration", agent + "shutdown_grace: soon\n", conductor.AgentMode,
			[]string{`chain.yaml:3: shutdown_grace: want a duration`, `got a string ("soon")`}},
		{"tiny max bytes", agent + "max_message_bytes: 10\n", conductor.AgentMode,
			[]string{`chain.yaml:3: max_message_bytes: must be at least 1024`}},
		{"max bytes not a number", agent + "max_message_bytes: lots\n", conductor.AgentMode,
			[]string{`chain.yaml:3: max_message_bytes: want an integer, got a string ("lots")`}},
		{"args as a string", "agent:\n  command: a\n  args: --acp\n", conductor.AgentMode,
			[]string{`chain.yaml:3: agent.args: want a list of strings, got a string ("--acp")`}},
		{"agent as a string", "agent: npx some-agent\n", conductor.AgentMode,
			[]string{`chain.yaml:1: agent: want a component mapping (name, command, args, env, cwd, url, headers, ping_interval, on_failure), got a string`}},
		{"proxies as a mapping", "proxies:\n  command: a\n", conductor.ProxyMode,
			[]string{`chain.yaml:2: proxies: want a list of components, got a mapping`}},
		{"env as a list", "agent:\n  command: a\n  env: [A=1]\n", conductor.AgentMode,
			[]string{`chain.yaml:3: agent.env: want a mapping of variable names to values, got a list`}},
		{"env name with =", "agent:\n  command: a\n  env: {'A=B': x}\n", conductor.AgentMode,
			[]string{`chain.yaml:3: agent.env.A=B: env: variable name "A=B" contains '='`}},
		{"duplicate key", "agent:\n  command: a\n  command: b\n", conductor.AgentMode,
			[]string{`chain.yaml:3: mapping key "command" already defined at line 2`}},
		{"not a mapping", "- command: a\n", conductor.ProxyMode,
			[]string{`chain.yaml:1: the file must be a mapping of chain settings, got a list`}},
		{"syntax error", "agent:\n  command: a\n args: [\n", conductor.AgentMode,
			[]string{`chain.yaml:2: invalid YAML: did not find expected key`}},
		{"two documents", agent + "---\nname: x\n", conductor.AgentMode,
			[]string{`chain.yaml:3: a chain file holds one YAML document`}},
		{"every problem at once", "proxies:\n  - comand: x\n  - name: p\nagent:\n  command: a\nlogging: {level: loud}\n", conductor.AgentMode,
			[]string{`chain.yaml:2: unknown key "comand"`, `chain.yaml:2: proxies[0].command: required`, `chain.yaml:3: proxies[1].command: required`, `chain.yaml:6: logging.level: invalid level "loud"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("chain.yaml", []byte(tc.yaml))
			if err == nil {
				err = f.Check(tc.mode)
			}
			if err == nil {
				t.Fatalf("no problems reported; want %q", tc.want)
			}
			if _, ok := err.(Problems); !ok {
				t.Errorf("error is %T, want Problems", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("problems lack %q; got:\n%v", w, err)
				}
			}
		})
	}
}

// TestOneProblemPerValue: a value of the wrong type is one problem; the
// zero its field was left at is not judged as a second.
func TestOneProblemPerValue(t *testing.T) {
	for _, y := range []string{
		"init_timeout: 60\n",
		"restart_limit: \"3\"\n",
		"max_message_bytes: \"1000000\"\n",
		"shutdown_grace: 2\n",
		"restart_backoff: [1s]\n",
		"spin: 1\n",
	} {
		_, err := Parse("chain.yaml", []byte("agent: {command: a}\n"+y))
		if ps, _ := err.(Problems); len(ps) != 1 {
			t.Errorf("%q: want one problem, got:\n%v", y, err)
		}
	}
}

// TestProblemsInOrder: the problems of a file come in the same order at
// every parse, the order of the checks, so that the editor's error and
// validate's list read the same from one run to the next.
func TestProblemsInOrder(t *testing.T) {
	y := "agent: {command: a}\ninit_timeout: -1s\nrestart_window: -1s\nrestart_backoff: -1s\nrestart_backoff_max: -1s\n"
	for range 20 {
		_, err := Parse("chain.yaml", []byte(y))
		ps, _ := err.(Problems)
		var lines []int
		for _, p := range ps {
			lines = append(lines, p.Line)
		}
		if !slices.Equal(lines, []int{2, 3, 4, 5}) {
			t.Fatalf("problems on lines %v, want 2, 3, 4, 5:\n%v", lines, err)
		}
	}
}

func TestFailureSettings(t *testing.T) {
	good := "agent: {command: a}\nproxies:\n  - {command: p, on_failure: restart}\n  - {command: q, on_failure: bypass}\ninit_timeout: 5s\nrestart_limit: 2\nrestart_window: 30s\nrestart_backoff: 1s\nrestart_backoff_max: 1m\nmcp_bridge: http\n"
	f, err := Parse("chain.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if f.Proxies[0].OnFailure != "restart" || f.Proxies[1].OnFailure != "bypass" || f.InitTimeout.String() != "5s" || f.MCPBridge != "http" ||
		f.RestartBackoff != time.Second || f.RestartBackoffMax != time.Minute {
		t.Errorf("decoded %+v", f)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"agent: {command: a, on_failure: restart}\n", `chain.yaml:1: agent.on_failure: "restart" is for proxies`},
		{"proxies:\n  - {command: p, on_failure: retry}\n", `chain.yaml:2: proxies[0].on_failure: invalid policy "retry"`},
		{"init_timeout: 0s\n", "chain.yaml:1: init_timeout: must be positive"},
		{"restart_limit: 0\n", "chain.yaml:1: restart_limit: must be at least 1"},
		{"restart_backoff: 0s\n", "chain.yaml:1: restart_backoff: must be positive"},
		{"restart_backoff_max: -1s\n", "chain.yaml:1: restart_backoff_max: must be positive"},
		{"mcp_bridge: carrier-pigeon\n", `chain.yaml:1: mcp_bridge: invalid bridge "carrier-pigeon"`},
		{"mcp_http_idle_timeout: -1s\n", `chain.yaml:1: mcp_http_idle_timeout: must not be negative`},
		{"spin: -1us\n", `chain.yaml:1: spin: must not be negative, got -1µs`},
		{"agent: {command: a}\nspin: 2ms\n", `chain.yaml:2: spin: must be at most 1ms, got 2ms (0 turns spinning off)`},
		{"spin: 50\n", `chain.yaml:1: spin: want a duration such as 2s or 500ms, got a number ("50")`},
		{"shutdown_grace: 0\n", "chain.yaml:1: shutdown_grace: must be positive, got 0s"},
		{"spin: 0\nrestart_backoff: 1\n", `chain.yaml:2: restart_backoff: want a duration such as 2s or 500ms, got a number ("1")`},
	} {
		_, err := Parse("chain.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestLoadProxyModeAgent: in proxy mode an agent section with problems of
// its own is reported as not allowed, which is what must be fixed, and its
// own problems are not; the rest of the file's still are.
func TestLoadProxyModeAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chain.yaml")
	if err := os.WriteFile(path, []byte("proxies: [{command: cat}]\nagent:\n  args: [x]\nshutdown_grace: -1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(Options{Mode: conductor.ProxyMode, File: path})
	if err == nil {
		t.Fatal("Load succeeded")
	}
	for _, w := range []string{"chain.yaml:2: agent: not allowed in proxy mode", "chain.yaml:4: shutdown_grace: must be positive"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("problems lack %q; got:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "agent.command") {
		t.Errorf("problems name what is wrong inside the agent section:\n%v", err)
	}
	// In agent mode the section's own problems are what to fix.
	if _, err := Load(Options{Mode: conductor.AgentMode, File: path}); err == nil || !strings.Contains(err.Error(), "chain.yaml:2: agent.command: required") {
		t.Errorf("agent mode: %v", err)
	}
}

// TestMistypedComponentOnce: a component that is not a mapping is reported
// as such, and not also as missing its command.
func TestMistypedComponentOnce(t *testing.T) {
	for _, yaml := range []string{"agent: npx some-agent\n", "agent: [a]\n", "proxies:\n  - x\nagent: {command: a}\n"} {
		_, err := Parse("chain.yaml", []byte(yaml))
		if ps, ok := err.(Problems); !ok || len(ps) != 1 || !strings.Contains(ps[0].Msg, "want a component mapping") {
			t.Errorf("%q: %v; want the one problem that it is no mapping", yaml, err)
		}
	}
}
