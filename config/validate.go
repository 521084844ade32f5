package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/supervisor"
	"github.com/acp-conductor/acp-conductor/trace"
)

// validate checks the values of a decoded file, each problem on its line.
func (f *File) validate() Problems {
	var ps Problems
	add := func(path, format string, args ...any) {
		if !f.mistyped[path] { // its type problem says what is wrong
			ps = append(ps, f.problem(f.nodes.line(path), path+": "+format, args...))
		}
	}

	names := make(map[string]string) // explicit component name -> its path
	checkComponent := func(path string, c *Component) {
		c.Origin = f.origin(path)
		if f.mistyped[path] {
			return // not a mapping (agent: npx x): its type problem says so
		}
		if c.URL != "" || f.nodes.has(path+".url") || len(c.Headers) > 0 {
			ps = append(ps, f.checkRemote(path, c)...)
		} else if strings.TrimSpace(c.Command) == "" {
			add(path+".command", "required (the program to run)")
		} else if f.nodes.has(path + ".ping_interval") {
			add(path+".ping_interval", "only for a remote component (url)")
		} else if strings.ContainsRune(c.Command, 0) {
			add(path+".command", "contains a NUL byte")
		}
		if f.nodes.has(path+".name") && c.Name == "" {
			add(path+".name", "empty; leave the key out to name it after what it runs")
		}
		if conductor.ReservedName(c.Name) {
			add(path+".name", "%q is the conductor's name for a peer of its own (client, conductor, mcp:...): choose another", c.Name)
		}
		if c.Name != "" {
			if prev, dup := names[c.Name]; dup {
				add(path+".name", "%q is already the name of %s (line %d)", c.Name, prev, f.nodes.line(prev))
			} else {
				names[c.Name] = path
			}
		}
		switch conductor.Policy(c.OnFailure) {
		case "", conductor.PolicyFail:
		case conductor.PolicyRestart, conductor.PolicyBypass:
			if path == "agent" {
				add(path+".on_failure", "%q is for proxies; the agent can only fail", c.OnFailure)
			}
		default:
			add(path+".on_failure", "invalid policy %q: want fail, restart or bypass", c.OnFailure)
		}
		for i, a := range c.Args {
			if strings.ContainsRune(a, 0) {
				add(path+".args["+strconv.Itoa(i)+"]", "contains a NUL byte")
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.Env)) {
			if err := checkEnv(name, c.Env[name]); err != nil {
				add(path+".env."+name, "%v", err)
			}
		}
	}
	for i := range f.Proxies {
		checkComponent("proxies["+strconv.Itoa(i)+"]", &f.Proxies[i])
	}
	if f.Agent != nil {
		checkComponent("agent", f.Agent)
	}

	if err := checkLevel(f.Logging.Level); err != nil && f.nodes.has("logging.level") {
		add("logging.level", "%v", err)
	}
	if err := checkFormat(f.Logging.Format); err != nil && f.nodes.has("logging.format") {
		add("logging.format", "%v", err)
	}
	if err := checkLogFile(f.Logging.File); err != nil {
		add("logging.file", "%v", err)
	}
	if err := checkPositive(f.ShutdownGrace); err != nil && f.nodes.has("shutdown_grace") {
		add("shutdown_grace", "%v", err)
	}
	if err := checkMaxBytes(f.MaxMessageBytes); err != nil && f.nodes.has("max_message_bytes") {
		add("max_message_bytes", "%v", err)
	}
	// A slice, not a map: the problems come in the same order every time.
	for _, s := range []struct {
		key string
		d   time.Duration
	}{{"init_timeout", f.InitTimeout}, {"restart_window", f.RestartWindow},
		{"restart_backoff", f.RestartBackoff}, {"restart_backoff_max", f.RestartBackoffMax}} {
		if err := checkPositive(s.d); err != nil && f.nodes.has(s.key) {
			add(s.key, "%v", err)
		}
	}
	if f.RestartLimit < 1 && f.nodes.has("restart_limit") {
		add("restart_limit", "must be at least 1, got %d", f.RestartLimit)
	}
	if err := checkTraceFile(f.Trace.File); err != nil {
		add("trace.file", "%v", err)
	}
	if err := checkDetail(f.Trace.Detail); err != nil && f.nodes.has("trace.detail") {
		add("trace.detail", "%v", err)
	}
	if err := checkServe(f.Trace.Serve); err != nil {
		add("trace.serve", "%v", err)
	}
	if err := checkBridge(f.MCPBridge); err != nil && f.nodes.has("mcp_bridge") {
		add("mcp_bridge", "%v", err)
	}
	if err := checkNotNegative(f.MCPHTTPIdle); err != nil {
		add("mcp_http_idle_timeout", "%v", err)
	}
	if err := checkSpin(f.Spin); err != nil {
		add("spin", "%v", err)
	}
	return ps
}

// origin names the place a path was written, for later messages.
func (f *File) origin(path string) string {
	if line := f.nodes.line(path); line > 0 {
		return fmt.Sprintf("%s:%d", f.path, line)
	}
	return f.path
}

// The value checks below are shared by the file and by Load, which applies
// them to whatever layer a setting finally came from.

func checkLevel(s string) error {
	if !slices.Contains(Levels, s) {
		return fmt.Errorf("invalid level %q: want one of %s", s, strings.Join(Levels, ", "))
	}
	return nil
}

func checkFormat(s string) error {
	if !slices.Contains(Formats, s) {
		return fmt.Errorf("invalid format %q: want one of %s", s, strings.Join(Formats, ", "))
	}
	return nil
}

// checkLogFile keeps logs off stdout, which carries the protocol.
func checkLogFile(s string) error {
	switch filepath.Clean(s) {
	case "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1":
		return fmt.Errorf("%q is standard output, which carries the protocol; leave the file empty to log to stderr", s)
	}
	return nil
}

func checkPositive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be positive, got %v", d)
	}
	return nil
}

func checkNotNegative(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must not be negative, got %v", d)
	}
	return nil
}

// checkSpin accepts 0, no spinning, up to MaxSpin.
func checkSpin(d time.Duration) error {
	if d > MaxSpin {
		return fmt.Errorf("must be at most %v, got %v (0 turns spinning off)", MaxSpin, d)
	}
	return checkNotNegative(d)
}

func checkBridge(s string) error {
	switch conductor.BridgeMode(s) {
	case conductor.BridgeAuto, conductor.BridgeStdio, conductor.BridgeHTTP:
		return nil
	}
	return fmt.Errorf("invalid bridge %q: want auto, stdio or http", s)
}

func checkMaxBytes(n int) error {
	if n < MinMessageBytes {
		return fmt.Errorf("must be at least %d, got %d", MinMessageBytes, n)
	}
	return nil
}

// UnknownEnv returns the names in environ (NAME=value entries) that start
// with EnvPrefix but name no setting: a typo there would otherwise be
// ignored without a word, while an unknown key in a chain file is an error.
func UnknownEnv(environ []string) []string {
	// Besides the documented variables, those the conductor itself sets
	// for the processes it starts: a nested conductor inherits its
	// chain's marker and its component's.
	known := map[string]bool{mcpbridge.EnvSocket: true, mcpbridge.EnvToken: true, EnvRemoteHeaders: true,
		EnvRemoteURL: true, supervisor.MarkerEnv: true, supervisor.ComponentEnv: true}
	for _, v := range Environment() {
		known[v.Name] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) && !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// LogFileHint returns the log file the settings name, as far as they can be
// read, for reporting a chain that cannot be loaded: the --log-file flag if
// set, else ACP_CONDUCTOR_LOGGING_FILE, else the chain file's if it parses.
func LogFileHint(file string, fs *pflag.FlagSet) string {
	if fs != nil {
		if fl := fs.Lookup("log-file"); fl != nil && fl.Changed {
			return fl.Value.String()
		}
	}
	if v := os.Getenv(envVar("logging.file")); v != "" { // empty counts as unset, as viper has it
		return v
	}
	if file != "" {
		if f, err := ReadFile(file); err == nil {
			return f.Logging.File
		}
	}
	return ""
}

func checkTraceFile(s string) error {
	if s != "" && checkLogFile(s) != nil {
		return fmt.Errorf("%q is standard output, which carries the protocol", s)
	}
	return nil
}

func checkDetail(s string) error {
	if !slices.Contains(trace.Details, trace.Detail(s)) {
		return fmt.Errorf("invalid detail %q: want full or metadata", s)
	}
	return nil
}

// checkServe accepts an empty address (no live viewer) or a loopback one:
// the viewer shows every message, and only this machine may see it.
func checkServe(s string) error {
	if s == "" {
		return nil
	}
	return trace.CheckLoopback(s)
}

// Validate reports every problem with the chain opts describes that it can
// find in one pass: tab indentation, the file's keys, values and names, the
// mode, the flags' and environment's settings, what Lint reports and, if
// commands, what CheckCommands does. Unlike Load it goes on past each
// problem, so that fixing one does not reveal the next. c is the chain
// once errs is empty.
func Validate(opts Options, commands bool) (c *Config, errs, warnings Problems) {
	if opts.File != "" && opts.Data == nil {
		data, err := Read(opts.File)
		if err != nil {
			return nil, Problems{{Msg: err.Error()}}, nil
		}
		opts.Data = data
	}
	tabs := TabProblems(opts.File, opts.Data)
	c, ps, err := load(opts)
	if err != nil {
		return nil, Problems{{Msg: err.Error()}}, nil
	}
	errs = tabs
	for _, p := range ps {
		// YAML refuses a tab where it is indentation in its own words, on
		// some line near it; the tab's own problem says it better.
		if len(tabs) == 0 || !strings.HasPrefix(p.Msg, "invalid YAML: ") {
			errs = append(errs, p)
		}
	}
	lerrs, warnings := c.Lint()
	errs = append(errs, lerrs...)
	if commands {
		for _, err := range c.commandErrs() {
			errs = append(errs, Problem{Msg: err.Error()})
		}
	}
	if len(errs) > 0 {
		return nil, errs, warnings
	}
	return c, nil, warnings
}

// Lint reports what Load accepts but a run would trip on: errors where the
// run would fail, warnings where it depends on the directory the editor
// starts the conductor in. It does not look for the programs; see
// CheckCommands.
func (c *Config) Lint() (errs, warnings Problems) {
	for role, comp := range c.runComponents() {
		at := func(format string, args ...any) Problem {
			return Problem{Msg: fmt.Sprintf("%s %q (%s): ", role, comp.Name, comp.Origin) + fmt.Sprintf(format, args...)}
		}
		cmd := strings.TrimSpace(comp.Command)
		if strings.ContainsAny(cmd, " \t") {
			if _, err := os.Stat(cmd); err != nil {
				errs = append(errs, at("command %q holds spaces: the command is one program; put the rest in args", comp.Command))
			}
		}
		if strings.HasPrefix(cmd, "~") {
			errs = append(errs, at("command %q: ~ is not expanded; write the full path", comp.Command))
		}
		switch {
		case strings.HasPrefix(comp.Cwd, "~"):
			errs = append(errs, at("cwd %q: ~ is not expanded; write the full path", comp.Cwd))
		case comp.Cwd != "" && !filepath.IsAbs(comp.Cwd):
			warnings = append(warnings, at("cwd %q is relative: it is resolved against the directory the editor starts the conductor in", comp.Cwd))
		}
	}
	for _, name := range UnknownEnv(os.Environ()) {
		errs = append(errs, Problem{Msg: fmt.Sprintf("environment variable %s names no setting (see acp-conductor --help)", name)})
	}
	return errs, warnings
}

// local reports whether comp is run rather than connected to, with a
// command to judge: one a chain file leaves out or mistypes has its own
// problem already.
func local(comp Component) bool {
	return comp.URL == "" && strings.TrimSpace(comp.Command) != "" && !strings.ContainsRune(comp.Command, 0)
}

// TabProblems reports the lines of data, the chain file at path, indented
// with a tab, which YAML does not allow, and which its parser reports in
// other words.
func TabProblems(path string, data []byte) Problems {
	var ps Problems
	for i, line := range strings.Split(string(data), "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") && strings.TrimSpace(line) != "" {
			ps = append(ps, Problem{File: path, Line: i + 1, Msg: "indented with a tab; YAML indentation must be spaces"})
		}
	}
	return ps
}
