package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// Options says where Load finds a chain.
type Options struct {
	// Mode is the role the conductor will play.
	Mode conductor.Mode
	// File is a chain file to read; empty means none.
	File string
	// Data is File's contents, when the caller has read them already
	// (with Read); nil means Load reads File. A file may be readable only
	// once (a pipe: validate <(generate-chain)), so what was read of it
	// is all there is.
	Data []byte
	// Components are command-line components: the proxies in order, then in
	// AgentMode the agent. They cannot be combined with File, since merging
	// two partial chains has no obvious meaning.
	Components []string
	// Flags holds the flags AddFlags defined, parsed; nil means none. A flag
	// overrides the environment and the file only if it was set.
	Flags *pflag.FlagSet
}

// MaxFileBytes bounds a chain file, which is a few hundred bytes in practice.
const MaxFileBytes = 1 << 20

// Load assembles the chain opts describes and layers its settings: flags,
// then ACP_CONDUCTOR_* environment variables, then the file, then defaults.
// Problems with the chain or its settings come back together as Problems,
// all of them at once: those of the file, of the mode and of the flags and
// environment. Once it has read them, Load removes the settings' variables
// from the environment, so that no component inherits them: a nested
// conductor takes only those its component's env sets.
func Load(opts Options) (*Config, error) {
	c, ps, err := load(opts)
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return c, nil
}

// LoadChecked is Load, then CheckCommands, in one pass: the programs of
// the components Load could read are looked for even where it found
// problems, and reported with them, so that fixing one problem does not
// reveal the next. With programs missing and no other problem, c is the
// chain all the same, so that the error is reported as its settings say.
func LoadChecked(opts Options) (c *Config, err error) {
	c, ps, err := load(opts)
	if err != nil {
		return nil, err
	}
	errs := c.commandErrs()
	if len(ps) > 0 {
		for _, err := range errs {
			ps = append(ps, Problem{Msg: err.Error()})
		}
		return nil, ps
	}
	return c, errors.Join(errs...)
}

// load is Load, going on past the problems it finds so that they all come
// out at once. Beside them it returns the chain as far as it could be
// assembled, for checks that look at its components; err is for what
// leaves nothing to check (an unreadable file).
func load(opts Options) (*Config, Problems, error) {
	if opts.File != "" && len(opts.Components) > 0 {
		return nil, nil, errors.New("config: give the chain either as a file (--config) or as arguments, not both")
	}
	c := &Config{Mode: opts.Mode, File: opts.File}
	var ps Problems
	var f *File
	if opts.File != "" {
		data := opts.Data
		if data == nil {
			var err error
			if data, err = Read(opts.File); err != nil {
				return nil, nil, err
			}
		}
		var fps Problems
		if f, fps = parse(opts.File, data); len(fps) > 0 {
			ps = append(ps, proxyModeAgent(opts.Mode, opts.File, data, fps)...)
		}
		if f != nil {
			for _, p := range f.check(opts.Mode) {
				if !slices.Contains(ps, p) { // proxyModeAgent may have said it
					ps = append(ps, p)
				}
			}
			c.Proxies = append([]Component(nil), f.Proxies...)
			if f.Agent != nil {
				c.Agent = *f.Agent
			}
		}
	} else {
		ps = append(ps, c.fromArgs(opts.Components)...)
	}
	// Whatever the chain came from (the file's headers may name it, and
	// are expanded by now), no component inherits the token.
	os.Unsetenv(EnvRemoteToken)

	named := make([]*Component, 0, len(c.Proxies)+1)
	for i := range c.Proxies {
		named = append(named, &c.Proxies[i])
	}
	if c.Mode == conductor.AgentMode {
		named = append(named, &c.Agent)
	}
	assignNames(named)

	v, err := layers(f, opts.Flags)
	if err != nil {
		return nil, nil, err
	}
	ps = append(ps, c.settle(v, opts.Flags)...)
	c.SpinFrom = origin("spin", f, opts.Flags)
	c.MaxMessageBytesFrom = origin("max_message_bytes", f, opts.Flags)
	c.LogFileFrom = origin("logging.file", f, opts.Flags)
	c.TraceFileFrom = origin("trace.file", f, opts.Flags)
	if len(ps) > 0 {
		// No chain will run: the variables stay, so that the problems
		// are logged where they say (LogFileHint).
		return c, ps, nil
	}
	// Read by now, the settings' variables are this conductor's alone: a
	// component inherits the environment, and a nested conductor (acp-
	// conductor proxy, as a component) would take them for its own, and
	// write the chain's trace file too, or fail to listen on its viewer's
	// address. A component's own env still sets them for it.
	for _, s := range settings {
		os.Unsetenv(envVar(s.key))
	}
	return c, ps, nil
}

// origin names where the setting key was set, as settle's messages name
// it, from the layer viper takes it from: its flag if set, else its
// environment variable, else the chain file f; "" if none sets it, and
// it has its default.
func origin(key string, f *File, fs *pflag.FlagSet) string {
	i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key })
	if i < 0 {
		return ""
	}
	if fs != nil {
		if fl := fs.Lookup(settings[i].flag); fl != nil && fl.Changed {
			return "flag --" + settings[i].flag
		}
	}
	if os.Getenv(envVar(key)) != "" { // empty counts as unset, as viper has it
		return "environment variable " + envVar(key)
	}
	if f != nil && f.nodes.has(key) {
		return fmt.Sprintf("chain file %s:%d", f.path, f.nodes.line(key))
	}
	return ""
}

// ReadFile reads and parses the chain file at path.
func ReadFile(path string) (*File, error) {
	data, err := Read(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Read reads the chain file at path, refusing one longer than
// MaxFileBytes without reading on (it may be a device that never ends).
func Read(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: chain file: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: chain file: %w", err)
	}
	if len(data) > MaxFileBytes {
		return nil, Problems{{File: path, Msg: fmt.Sprintf("larger than %d bytes; is this a chain file?", MaxFileBytes)}}
	}
	return data, nil
}

// fromArgs fills in the components from command-line strings. One that
// cannot be read is a problem, and stays in the chain with no command.
func (c *Config) fromArgs(args []string) Problems {
	var ps Problems
	comps := make([]Component, 0, len(args))
	for i, s := range args {
		comp, err := ParseComponent(s)
		if err != nil {
			// Kept in its place, with no command to look for, so that
			// the last is still the agent and the rest are still checked.
			ps = append(ps, Problem{Msg: fmt.Sprintf("argument %d: %v", i+1, err)})
			comp = Component{}
		}
		comp.Origin = "argument " + strconv.Itoa(i+1)
		comps = append(comps, comp)
	}
	if c.Mode == conductor.AgentMode {
		if len(comps) == 0 {
			return Problems{{Msg: "no agent given: pass the components as arguments, proxies first and the agent last, or a chain file with --config"}}
		}
		c.Agent, comps = comps[len(comps)-1], comps[:len(comps)-1]
	}
	c.Proxies = comps
	remotes := []*Component{&c.Agent}
	for i := range c.Proxies {
		remotes = append(remotes, &c.Proxies[i])
	}
	remoteTokenHeaders(remotes)
	return ps
}

// layers builds the viper instance that resolves every setting, highest
// priority first: set flags, environment, file, defaults.
func layers(f *File, fs *pflag.FlagSet) (*viper.Viper, error) {
	v := viper.New()
	for _, s := range settings {
		v.SetDefault(s.key, s.def)
		if err := v.BindEnv(s.key, envVar(s.key)); err != nil {
			return nil, fmt.Errorf("config: bind %s: %w", envVar(s.key), err)
		}
		if fs == nil {
			continue
		}
		if fl := fs.Lookup(s.flag); fl != nil {
			if err := v.BindPFlag(s.key, fl); err != nil {
				return nil, fmt.Errorf("config: bind --%s: %w", s.flag, err)
			}
		}
	}
	if f != nil {
		if err := v.MergeConfigMap(f.settings()); err != nil {
			return nil, fmt.Errorf("config: %s: %w", f.path, err)
		}
	}
	return v, nil
}

// settings returns, as viper's nested map, the settings f actually wrote,
// so that an absent key falls through to the default.
func (f *File) settings() map[string]any {
	vals := map[string]any{
		"name":                  f.Name,
		"logging.level":         f.Logging.Level,
		"logging.format":        f.Logging.Format,
		"logging.file":          f.Logging.File,
		"shutdown_grace":        f.ShutdownGrace,
		"max_message_bytes":     f.MaxMessageBytes,
		"init_timeout":          f.InitTimeout,
		"restart_limit":         f.RestartLimit,
		"restart_window":        f.RestartWindow,
		"restart_backoff":       f.RestartBackoff,
		"restart_backoff_max":   f.RestartBackoffMax,
		"mcp_bridge":            f.MCPBridge,
		"mcp_http_idle_timeout": f.MCPHTTPIdle,
		"trace.file":            f.Trace.File,
		"trace.detail":          f.Trace.Detail,
		"trace.serve":           f.Trace.Serve,
		"spin":                  f.Spin,
	}
	m := make(map[string]any)
	for key, val := range vals {
		if !f.nodes.has(key) {
			continue
		}
		dst := m
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := dst[p].(map[string]any)
			if !ok {
				sub = make(map[string]any)
				dst[p] = sub
			}
			dst = sub
		}
		dst[parts[len(parts)-1]] = val
	}
	return m
}

// settle checks the settings given by flags and environment variables,
// each naming where it came from, then reads every setting from v into c.
//
// Each layer is checked where it enters, and viper alone decides which
// layer wins: the file's values were checked by Parse, on their lines, and
// the defaults are valid, so only the flags and the environment are left to
// check here. A bad value is reported even when a higher layer overrides
// it, as a bad value in the file is. With problems, c is left unset.
func (c *Config) settle(v *viper.Viper, fs *pflag.FlagSet) Problems {
	var ps Problems
	for _, s := range settings {
		check := checks[s.key]
		if fs != nil {
			if fl := fs.Lookup(s.flag); fl != nil && fl.Changed {
				if err := check(fl.Value.String()); err != nil {
					ps = append(ps, Problem{Msg: fmt.Sprintf("%s: %v (from flag --%s)", s.key, err, s.flag)})
				}
			}
		}
		if val := os.Getenv(envVar(s.key)); val != "" { // empty counts as unset, as viper has it
			if err := check(val); err != nil {
				ps = append(ps, Problem{Msg: fmt.Sprintf("%s: %v (from environment variable %s)", s.key, err, envVar(s.key))})
			}
		}
	}
	if len(ps) > 0 {
		return ps
	}

	// Every value is valid now; the conversions cannot fail.
	c.Name = v.GetString("name")
	c.Logging = Logging{Level: v.GetString("logging.level"), Format: v.GetString("logging.format"), File: v.GetString("logging.file")}
	c.ShutdownGrace, _ = duration(v.Get("shutdown_grace"))
	c.MaxMessageBytes, _ = integer(v.Get("max_message_bytes"))
	c.InitTimeout, _ = duration(v.Get("init_timeout"))
	c.RestartLimit, _ = integer(v.Get("restart_limit"))
	c.RestartWindow, _ = duration(v.Get("restart_window"))
	c.RestartBackoff, _ = duration(v.Get("restart_backoff"))
	c.RestartBackoffMax, _ = duration(v.Get("restart_backoff_max"))
	c.MCPBridge = v.GetString("mcp_bridge")
	c.MCPHTTPIdle, _ = duration(v.Get("mcp_http_idle_timeout"))
	c.Trace = Trace{File: v.GetString("trace.file"), Detail: v.GetString("trace.detail"), Serve: v.GetString("trace.serve")}
	c.Spin, _ = duration(v.Get("spin"))
	return nil
}

// checks holds each setting's check of a value as viper holds it: a string
// from a flag or the environment, a typed value from the file or the
// defaults.
var checks = map[string]func(v any) error{
	"name":                  func(any) error { return nil },
	"logging.level":         func(v any) error { return checkLevel(fmt.Sprint(v)) },
	"logging.format":        func(v any) error { return checkFormat(fmt.Sprint(v)) },
	"logging.file":          func(v any) error { return checkLogFile(fmt.Sprint(v)) },
	"shutdown_grace":        checkDuration(checkPositive),
	"max_message_bytes":     checkInteger(checkMaxBytes),
	"init_timeout":          checkDuration(checkPositive),
	"restart_limit":         checkInteger(func(n int) error { return checkAtLeast(n, 1) }),
	"restart_window":        checkDuration(checkPositive),
	"restart_backoff":       checkDuration(checkPositive),
	"restart_backoff_max":   checkDuration(checkPositive),
	"mcp_bridge":            func(v any) error { return checkBridge(fmt.Sprint(v)) },
	"mcp_http_idle_timeout": checkDuration(checkNotNegative),
	"trace.file":            func(v any) error { return checkTraceFile(fmt.Sprint(v)) },
	"trace.detail":          func(v any) error { return checkDetail(fmt.Sprint(v)) },
	"trace.serve":           func(v any) error { return checkServe(fmt.Sprint(v)) },
	"spin":                  checkDuration(checkSpin),
}

func checkDuration(check func(time.Duration) error) func(any) error {
	return func(v any) error {
		d, err := duration(v)
		if err != nil {
			return err
		}
		return check(d)
	}
}

func checkInteger(check func(int) error) func(any) error {
	return func(v any) error {
		n, err := integer(v)
		if err != nil {
			return err
		}
		return check(n)
	}
}

func checkAtLeast(n, min int) error {
	if n < min {
		return fmt.Errorf("must be at least %d, got %d", min, n)
	}
	return nil
}

// duration converts what viper holds for a duration: a time.Duration from the
// file or the defaults, a string from a flag or the environment. Unlike
// viper's own conversion it refuses a bare number, which would mean
// nanoseconds.
func duration(v any) (time.Duration, error) {
	switch v := v.(type) {
	case time.Duration:
		return v, nil
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: want a number with a unit, such as 2s or 500ms", v)
		}
		return d, nil
	}
	return 0, fmt.Errorf("invalid duration %v", v)
}

// integer converts what viper holds for an integer, refusing what viper's
// own conversion would quietly turn into 0.
func integer(v any) (int, error) {
	switch v := v.(type) {
	case int:
		return v, nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("invalid integer %q", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("invalid integer %v", v)
}

// proxyModeAgent returns ps, the problems of the chain file at path (data),
// with those of its agent section replaced by the one
// that matters in proxy mode: that the section may not be there at all.
// Fixing what is wrong inside it would only lead to that.
func proxyModeAgent(mode conductor.Mode, path string, data []byte, ps Problems) Problems {
	if mode != conductor.ProxyMode {
		return ps
	}
	f := &File{path: path}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return ps
	}
	if f.nodes = newIndex(&root); !f.nodes.has("agent") {
		return ps
	}
	kept := Problems{f.agentInProxyMode()}
	for _, p := range ps {
		if !strings.HasPrefix(p.Msg, "agent.") && !strings.HasPrefix(p.Msg, "agent:") {
			kept = append(kept, p)
		}
	}
	return kept
}
