package config

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
)

// writeChain writes a chain file into a fresh directory and returns its path.
func writeChain(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chain.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// flags returns a flag set as AddFlags defines it, parsed from args.
func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// clearEnv unsets every variable Load reads, for the duration of the test.
func clearEnv(t *testing.T) {
	for _, s := range settings {
		t.Setenv(envVar(s.key), "") // registers the restore
		os.Unsetenv(envVar(s.key))
	}
}

func TestLoadDefaults(t *testing.T) {
	clearEnv(t)
	c, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"my-agent --acp"}, Flags: flags(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Mode:              conductor.AgentMode,
		Proxies:           []Component{},
		Agent:             Component{Name: "my-agent", Command: "my-agent", Args: []string{"--acp"}, Origin: "argument 1"},
		Logging:           Logging{Level: "info", Format: "console"},
		ShutdownGrace:     conductor.DefaultGracePeriod,
		MaxMessageBytes:   wire.DefaultMaxMessageBytes,
		InitTimeout:       conductor.DefaultInitTimeout,
		RestartLimit:      conductor.DefaultRestartLimit,
		RestartWindow:     conductor.DefaultRestartWindow,
		RestartBackoff:    conductor.DefaultRestartBackoff,
		RestartBackoffMax: conductor.DefaultRestartBackoffMax,
		MCPBridge:         string(conductor.BridgeAuto),
		MCPHTTPIdle:       mcpbridge.DefaultHTTPIdleTimeout,
		Trace:             Trace{Detail: "full"},
		Spin:              DefaultSpin,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", c, want)
	}
}

// TestLoadPrecedence checks each setting through every layer: a set flag beats
// the environment, which beats the file, which beats the default.
func TestLoadPrecedence(t *testing.T) {
	file := `
name: from-file
agent: {command: a}
logging: {level: debug, format: json, file: /tmp/file.log}
shutdown_grace: 3s
max_message_bytes: 2048
`
	type want struct {
		name, level, format, logFile string
		grace                        time.Duration
		max                          int
	}
	fromFile := want{"from-file", "debug", "json", "/tmp/file.log", 3 * time.Second, 2048}
	for _, tc := range []struct {
		name  string
		file  string // "" means components from arguments
		env   map[string]string
		flags []string
		want  want
	}{
		{name: "file over defaults", file: file, want: fromFile},
		{name: "defaults when file is silent", file: "agent: {command: a}\n",
			want: want{"", "info", "console", "", 2 * time.Second, 64 << 20}},
		{name: "environment over file", file: file,
			env: map[string]string{
				"ACP_CONDUCTOR_NAME":              "from-env",
				"ACP_CONDUCTOR_LOGGING_LEVEL":     "warn",
				"ACP_CONDUCTOR_LOGGING_FORMAT":    "console",
				"ACP_CONDUCTOR_LOGGING_FILE":      "/tmp/env.log",
				"ACP_CONDUCTOR_SHUTDOWN_GRACE":    "4s",
				"ACP_CONDUCTOR_MAX_MESSAGE_BYTES": "4096",
			},
			want: want{"from-env", "warn", "console", "/tmp/env.log", 4 * time.Second, 4096}},
		{name: "flags over environment", file: file,
			env: map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": "warn", "ACP_CONDUCTOR_SHUTDOWN_GRACE": "4s"},
			flags: []string{"--name=from-flag", "--log-level=error", "--log-format=console", "--log-file=/tmp/flag.log",
				"--shutdown-grace=5s", "--max-message-bytes=8192"},
			want: want{"from-flag", "error", "console", "/tmp/flag.log", 5 * time.Second, 8192}},
		{name: "unset flags do not override", file: file,
			env:   map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": "warn"},
			flags: []string{"--name=from-flag"},
			want:  want{"from-flag", "warn", "json", "/tmp/file.log", 3 * time.Second, 2048}},
		{name: "flag set to its default still wins", file: file,
			flags: []string{"--log-level=info"},
			want:  want{"from-file", "info", "json", "/tmp/file.log", 3 * time.Second, 2048}},
		{name: "empty environment variable is unset", file: file,
			env:  map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": ""},
			want: fromFile},
		{name: "environment without file",
			env:  map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": "error"},
			want: want{"", "error", "console", "", 2 * time.Second, 64 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c := loadLayered(t, tc.file, tc.flags)
			got := want{c.Name, c.Logging.Level, c.Logging.Format, c.Logging.File, c.ShutdownGrace, c.MaxMessageBytes}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// loadLayered loads an agent-mode chain from file, or from one component
// given as an argument when file is "", with the flags set as in args and
// whatever environment the test has set.
func loadLayered(t *testing.T, file string, args []string) *Config {
	t.Helper()
	opts := Options{Mode: conductor.AgentMode, Flags: flags(t, args...)}
	if file != "" {
		opts.File = writeChain(t, file)
	} else {
		opts.Components = []string{"a"}
	}
	c, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		flags []string
		want  string
	}{
		{"bad level from environment", map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": "loud"}, nil,
			`logging.level: invalid level "loud": want one of debug, info, warn, error (from environment variable ACP_CONDUCTOR_LOGGING_LEVEL)`},
		{"bad format from flag", nil, []string{"--log-format=xml"},
			`logging.format: invalid format "xml": want one of console, json (from flag --log-format)`},
		{"bare number grace from environment", map[string]string{"ACP_CONDUCTOR_SHUTDOWN_GRACE": "5"}, nil,
			`shutdown_grace: invalid duration "5": want a number with a unit`},
		{"negative grace from flag", nil, []string{"--shutdown-grace=-1s"},
			`shutdown_grace: must be positive, got -1s (from flag --shutdown-grace)`},
		{"zero grace from environment", map[string]string{"ACP_CONDUCTOR_SHUTDOWN_GRACE": "0s"}, nil,
			`shutdown_grace: must be positive, got 0s (from environment variable ACP_CONDUCTOR_SHUTDOWN_GRACE)`},
		{"non-numeric max bytes from environment", map[string]string{"ACP_CONDUCTOR_MAX_MESSAGE_BYTES": "big"}, nil,
			`max_message_bytes: invalid integer "big"`},
		{"log file on stdout from flag", nil, []string{"--log-file=/dev/stdout"},
			`logging.file: "/dev/stdout" is standard output`},
		{"bad level from environment under a good flag", map[string]string{"ACP_CONDUCTOR_LOGGING_LEVEL": "loud"}, []string{"--log-level=debug"},
			`logging.level: invalid level "loud": want one of debug, info, warn, error (from environment variable ACP_CONDUCTOR_LOGGING_LEVEL)`},
		{"negative MCP idle timeout from environment", map[string]string{"ACP_CONDUCTOR_MCP_HTTP_IDLE_TIMEOUT": "-5m"}, nil,
			`mcp_http_idle_timeout: must not be negative, got -5m0s (from environment variable ACP_CONDUCTOR_MCP_HTTP_IDLE_TIMEOUT)`},
		{"negative spin from environment", map[string]string{"ACP_CONDUCTOR_SPIN": "-1us"}, nil,
			`spin: must not be negative, got -1µs (from environment variable ACP_CONDUCTOR_SPIN)`},
		{"long spin from flag", nil, []string{"--spin=2ms"},
			`spin: must be at most 1ms, got 2ms (0 turns spinning off) (from flag --spin)`},
		{"long spin from environment under a good flag", map[string]string{"ACP_CONDUCTOR_SPIN": "1001us"}, []string{"--spin=0"},
			`spin: must be at most 1ms, got 1.001ms (0 turns spinning off) (from environment variable ACP_CONDUCTOR_SPIN)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"a"}, Flags: flags(t, tc.flags...)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestLoadSpin layers the spin setting: a set flag beats the environment,
// which beats the file, which beats the default; 0 (no spinning) and the
// bound itself are accepted from each. SpinFrom names the layer it came
// from.
func TestLoadSpin(t *testing.T) {
	const (
		env    = "environment variable ACP_CONDUCTOR_SPIN"
		inFile = "the chain file, line 2"
	)
	for _, tc := range []struct {
		name  string
		file  string // "" means components from arguments
		env   string
		flags []string
		want  time.Duration
		from  string
	}{
		{name: "default", want: DefaultSpin},
		{name: "default when file is silent", file: "agent: {command: a}\n", want: DefaultSpin},
		{name: "file over default", file: "agent: {command: a}\nspin: 20us\n", want: 20 * time.Microsecond, from: inFile},
		{name: "environment over file", file: "agent: {command: a}\nspin: 20us\n", env: "30µs", want: 30 * time.Microsecond, from: env},
		{name: "flag over environment", file: "agent: {command: a}\nspin: 20us\n", env: "30us", flags: []string{"--spin=40us"}, want: 40 * time.Microsecond, from: "flag --spin"},
		{name: "zero from file", file: "agent: {command: a}\nspin: 0s\n", from: inFile},
		{name: "bare zero from file", file: "agent: {command: a}\nspin: 0\n", from: inFile},
		{name: "zero from environment", env: "0", from: env},
		{name: "zero from flag", env: "30us", flags: []string{"--spin=0"}, from: "flag --spin"},
		{name: "the bound from flag", flags: []string{"--spin=1ms"}, want: MaxSpin, from: "flag --spin"},
		{name: "the bound from file", file: "agent: {command: a}\nspin: 1ms\n", want: MaxSpin, from: inFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			if tc.env != "" {
				t.Setenv("ACP_CONDUCTOR_SPIN", tc.env)
			}
			c := loadLayered(t, tc.file, tc.flags)
			if c.Spin != tc.want {
				t.Errorf("spin = %v, want %v", c.Spin, tc.want)
			}
			from := tc.from
			if from == inFile {
				from = "chain file " + c.File + ":2"
			}
			if c.SpinFrom != from {
				t.Errorf("spin from %q, want %q", c.SpinFrom, from)
			}
		})
	}
}

// A command that does not spin (serve) defines no --spin: the flag is
// refused as unknown, and the environment and the file still layer.
func TestAddFlagsExcept(t *testing.T) {
	clearEnv(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	AddFlags(fs, "spin")
	if fs.Lookup("spin") != nil || fs.Lookup("log-level") == nil {
		t.Fatalf("AddFlags(fs, \"spin\") defines --spin %v, --log-level %v; want only the latter",
			fs.Lookup("spin") != nil, fs.Lookup("log-level") != nil)
	}
	if err := fs.Parse([]string{"--spin=1ms"}); err == nil || !strings.Contains(err.Error(), "unknown flag: --spin") {
		t.Errorf("parsing --spin: %v; want it refused as unknown", err)
	}
	t.Setenv("ACP_CONDUCTOR_SPIN", "30us")
	c, err := Load(Options{Mode: conductor.AgentMode, File: writeChain(t, "agent: {command: a}\nspin: 20us\n"), Flags: fs})
	if err != nil {
		t.Fatal(err)
	}
	if c.Spin != 30*time.Microsecond || c.SpinFrom != "environment variable ACP_CONDUCTOR_SPIN" {
		t.Errorf("spin %v from %q; want 30µs from the environment", c.Spin, c.SpinFrom)
	}
}

func TestLoadComponents(t *testing.T) {
	clearEnv(t)
	args := []string{"npx ctx-proxy", "TOKEN=t npx filter", "my-agent --acp"}

	c, err := Load(Options{Mode: conductor.AgentMode, Components: args})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Proxies) != 2 || c.Agent.Command != "my-agent" {
		t.Fatalf("got proxies %+v, agent %+v", c.Proxies, c.Agent)
	}
	if c.Proxies[0].Name != "ctx-proxy" || c.Proxies[1].Name != "filter" || c.Proxies[1].Env["TOKEN"] != "t" || c.Proxies[1].Origin != "argument 2" {
		t.Errorf("proxies = %+v", c.Proxies)
	}
	if got := c.Summary(); got != "2 proxies, agent my-agent" {
		t.Errorf("Summary = %q", got)
	}

	// In proxy mode every component is a proxy, and none at all is allowed.
	c, err = Load(Options{Mode: conductor.ProxyMode, Components: args})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Proxies) != 3 || c.Summary() != "3 proxies (proxy mode)" {
		t.Errorf("proxy mode: %s", c.Summary())
	}
	if _, err := Load(Options{Mode: conductor.ProxyMode}); err != nil {
		t.Errorf("proxy mode with no proxies: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	clearEnv(t)
	good := writeChain(t, "agent: {command: a}\n")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no agent", Options{Mode: conductor.AgentMode}, "no agent given"},
		{"file and arguments", Options{Mode: conductor.AgentMode, File: good, Components: []string{"a"}}, "not both"},
		{"missing file", Options{Mode: conductor.AgentMode, File: filepath.Join(t.TempDir(), "nope.yaml")}, "no such file"},
		{"bad argument", Options{Mode: conductor.AgentMode, Components: []string{"ok", "x | y", "FOO=1"}},
			"argument 2: component \"x | y\": unquoted shell operator"},
		{"every bad argument", Options{Mode: conductor.AgentMode, Components: []string{"ok", "x | y", "FOO=1"}},
			"argument 3: component \"FOO=1\": no command"},
		{"file problem carries its line", Options{Mode: conductor.AgentMode, File: writeChain(t, "agent:\n  command: a\n  cmd: b\n")},
			`chain.yaml:3: unknown key "cmd" in agent`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConductorConfig(t *testing.T) {
	clearEnv(t)
	c, err := Load(Options{Mode: conductor.AgentMode, File: "testdata/chain.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	cc := c.Conductor(nil)
	want := conductor.Config{
		Mode: conductor.AgentMode,
		Proxies: []conductor.Component{
			{Name: "context", Command: "ctx-proxy", Args: []string{"--flag", "x"}, Env: map[string]string{"API_KEY": "abc", "lower_case": "kept"}, Dir: "/tmp", OnFailure: conductor.PolicyRestart},
			{Name: "filter", Command: "/usr/local/bin/filter", OnFailure: conductor.PolicyBypass},
		},
		Agent:             conductor.Component{Name: "my-agent", Command: "npx", Args: []string{"-y", "some-agent", "--acp"}},
		GracePeriod:       5 * time.Second,
		MaxMessageBytes:   1 << 20,
		InitTimeout:       30 * time.Second,
		RestartLimit:      5,
		RestartWindow:     2 * time.Minute,
		RestartBackoff:    250 * time.Millisecond,
		RestartBackoffMax: conductor.DefaultRestartBackoffMax,
		MCPBridge:         conductor.BridgeStdio,
		MCPHTTPIdle:       2 * time.Hour,
	}
	if !reflect.DeepEqual(cc, want) {
		t.Errorf("Conductor =\n%+v\nwant\n%+v", cc, want)
	}
	if c.Name != "my-chain" || c.Logging.Level != "debug" {
		t.Errorf("settings = %q %+v", c.Name, c.Logging)
	}

	// An idle timeout of 0 keeps HTTP sessions, which the conductor spells
	// as negative: its own zero means the default.
	c, err = Load(Options{Mode: conductor.AgentMode, Components: []string{"a"}, Flags: flags(t, "--mcp-http-idle-timeout=0")})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Conductor(nil).MCPHTTPIdle; got >= 0 {
		t.Errorf("mcp_http_idle_timeout 0 gave the conductor %v, want a negative duration", got)
	}
}

func TestCheckCommands(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"sh -c true", "./agent.sh"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Agent.Cwd = dir // a relative command is found from the component's directory
	if err := c.CheckCommands(); err != nil {
		t.Errorf("CheckCommands: %v", err)
	}

	c, err = Load(Options{Mode: conductor.AgentMode, Components: []string{"no-such-proxy-xyz", "/no/such/agent"}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.CheckCommands()
	for _, want := range []string{
		`proxy "no-such-proxy-xyz" (argument 1): command "no-such-proxy-xyz" not found in PATH`,
		`agent "agent" (argument 2): command "/no/such/agent":`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCommands error = %v\nwant it to contain %q", err, want)
		}
	}
}

// TestLoadCheckedEveryComponent: an argument that cannot be read does
// not keep the others from being looked for, nor does a bad setting:
// every problem comes back at once.
func TestLoadCheckedEveryComponent(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		name string
		mode conductor.Mode
		args []string
		flag []string
		want []string
	}{
		{"bad proxy", conductor.AgentMode, []string{"no-such-proxy-xyz", "x | y", "no-such-agent-xyz"}, nil, []string{
			`proxy "no-such-proxy-xyz" (argument 1): command "no-such-proxy-xyz" not found in PATH`,
			`argument 2: component "x | y": unquoted shell operator`,
			`agent "no-such-agent-xyz" (argument 3): command "no-such-agent-xyz" not found in PATH`}},
		{"bad agent", conductor.AgentMode, []string{"no-such-proxy-xyz", "my-agent 'oops"}, nil, []string{
			`proxy "no-such-proxy-xyz" (argument 1): command "no-such-proxy-xyz" not found in PATH`,
			`argument 2: component "my-agent 'oops": unbalanced quote`}},
		{"proxy mode", conductor.ProxyMode, []string{"", "no-such-proxy-xyz"}, nil, []string{
			`argument 1: component "": empty`,
			`proxy "no-such-proxy-xyz" (argument 2): command "no-such-proxy-xyz" not found in PATH`}},
		{"bad setting", conductor.AgentMode, []string{"no-such-agent-xyz"}, []string{"--shutdown-grace=-1s"}, []string{
			"shutdown_grace",
			`agent "no-such-agent-xyz" (argument 1): command "no-such-agent-xyz" not found in PATH`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadChecked(Options{Mode: tc.mode, Components: tc.args, Flags: flags(t, tc.flag...)})
			if c != nil {
				t.Errorf("LoadChecked returned a chain beside its problems")
			}
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("LoadChecked error = %v\nwant it to contain %q", err, want)
				}
			}
		})
	}

	// Only programs missing: the chain comes back beside them, for its
	// settings to say how the error is reported.
	c, err := LoadChecked(Options{Mode: conductor.AgentMode, Components: []string{"no-such-agent-xyz"}, Flags: flags(t, "--log-level=debug")})
	if c == nil || c.Logging.Level != "debug" || err == nil || !strings.Contains(err.Error(), "not found in PATH") {
		t.Errorf("LoadChecked = %+v, %v; want the chain and its missing program", c, err)
	}
}

// TestLogFileHintAfterProblems: a chain Load refuses leaves the settings'
// variables in place, so that its problems are logged to the file they
// name.
func TestLogFileHintAfterProblems(t *testing.T) {
	clearEnv(t)
	logFile := filepath.Join(t.TempDir(), "acp.log")
	t.Setenv(envVar("logging.file"), logFile)
	t.Setenv(envVar("shutdown_grace"), "soon")
	if _, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"a"}}); err == nil {
		t.Fatal("Load accepted a shutdown_grace of soon")
	}
	if got := LogFileHint("", nil); got != logFile {
		t.Errorf("LogFileHint after Load's problems = %q, want %q", got, logFile)
	}
}

// TestEverySettingChecked: settle checks each layered setting a flag or the
// environment gives, so each needs its check.
func TestEverySettingChecked(t *testing.T) {
	for _, s := range settings {
		if checks[s.key] == nil {
			t.Errorf("setting %s has no check", s.key)
		}
	}
	if len(checks) != len(settings) {
		t.Errorf("%d checks for %d settings", len(checks), len(settings))
	}
}
