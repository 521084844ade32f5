package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// A Component is one program of the chain, as a chain file or a command-line
// component describes it.
type Component struct {
	Name    string            `yaml:"name"`    // defaults to what it runs (see assignNames)
	Command string            `yaml:"command"` // looked up in PATH unless it holds a slash
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"` // names keep their case
	Cwd     string            `yaml:"cwd"` // empty means the conductor's

	// URL makes the component a remote one, reached over ACP's WebSocket
	// or Streamable HTTP transport instead of run (see RemoteCommand); it
	// excludes Command, Args, Env and Cwd. Headers go with every request,
	// each ${VAR} in their values taken from the environment.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// PingInterval is how often a remote component's WebSocket is pinged;
	// one whose pong does not come within it is lost, and the component
	// fails. Nil means remote-connect's default, 0 none.
	PingInterval *time.Duration `yaml:"ping_interval"`

	// OnFailure is fail (the default), restart or bypass; see conductor.Policy.
	OnFailure string `yaml:"on_failure"`

	// Origin says where the component was defined, such as "chain.yaml:12"
	// or "argument 2", so later errors can point back at it.
	Origin string `yaml:"-"`
}

// Conductor returns c as the conductor runs it.
func (c Component) Conductor() conductor.Component { return c.conductor(0, "") }

// conductor is Conductor in a chain whose messages may be maxBytes long
// (0: the default), which a remote component's connection must carry, and
// that logs at level ("": info), which it logs at too.
func (c Component) conductor(maxBytes int, level string) conductor.Component {
	if c.URL != "" {
		return c.remoteConductor(maxBytes, level)
	}
	return conductor.Component{
		Name:    c.Name,
		Command: c.Command,
		Args:    c.Args,
		Env:     c.Env,
		Dir:     c.Cwd,

		OnFailure: conductor.Policy(c.OnFailure),
	}
}

// ParseComponent splits a command-line component such as
// "FOO=1 my-agent --acp 'a b'" into words as a POSIX shell would, without
// expanding anything, and takes its leading NAME=value words as environment.
func ParseComponent(s string) (Component, error) {
	if IsRemote(s) {
		c := Component{URL: strings.TrimSpace(s)}
		if err := checkURL(c.URL); err != nil {
			// Not s: the error shows the URL without the credentials
			// it may be refused for.
			return Component{}, fmt.Errorf("component: %w", err)
		}
		return c, nil
	}
	words, err := splitWords(s)
	if err != nil {
		return Component{}, fmt.Errorf("component %q: %w", s, err)
	}
	var c Component
	for len(words) > 0 {
		name, value, ok := envWord(words[0])
		if !ok {
			break
		}
		if c.Env == nil {
			c.Env = make(map[string]string)
		}
		c.Env[name] = value
		words = words[1:]
	}
	if len(words) == 0 {
		if c.Env != nil {
			return Component{}, fmt.Errorf("component %q: no command after the NAME=value words", s)
		}
		return Component{}, fmt.Errorf("component %q: empty", s)
	}
	c.Command, c.Args = words[0], words[1:]
	if len(c.Args) == 0 {
		c.Args = nil
	}
	if err := c.check(); err != nil {
		return Component{}, fmt.Errorf("component %q: %w", s, err)
	}
	return c, nil
}

// envWord reports whether w is a shell assignment NAME=value.
func envWord(w string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(w, "=")
	if !ok || name == "" || !isShellName(name) {
		return "", "", false
	}
	return name, value, true
}

func isShellName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// check reports what would stop c from being started at all. The chain-file
// parser reports the same things with lines attached, field by field.
func (c *Component) check() error {
	var errs []error
	if strings.TrimSpace(c.Command) == "" {
		errs = append(errs, errors.New("command is required"))
	}
	if strings.ContainsRune(c.Command, 0) {
		errs = append(errs, errors.New("command contains a NUL byte"))
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			errs = append(errs, fmt.Errorf("argument %d contains a NUL byte", i+1))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Env)) {
		if err := checkEnv(name, c.Env[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkEnv rejects what execve cannot pass. Names are otherwise free: some
// programs read variables that are not valid shell names.
func checkEnv(name, value string) error {
	switch {
	case name == "":
		return errors.New("env: empty variable name")
	case strings.ContainsAny(name, "=\x00"):
		return fmt.Errorf("env: variable name %q contains '=' or a NUL byte", name)
	case strings.ContainsRune(value, 0):
		return fmt.Errorf("env: %s: value contains a NUL byte", name)
	}
	return nil
}

// defaultName is the name a component gets when none is given.
func defaultName(command string) string {
	base := filepath.Base(strings.TrimSpace(command))
	if base == "." || base == string(filepath.Separator) || base == "" {
		return "component"
	}
	return base
}

// assignNames gives each unnamed component a name that says what it runs:
// its program's base name, or, for a program that only runs another (env,
// npx, uvx, node, python3 ...), the package or script it runs (see
// programName). Where that would be shared, as by "acp sample-proxy" and
// "acp sample-agent", each sharer adds its first argument that is not a
// flag ("acp-sample-proxy", "acp-sample-agent"), and "-2", "-3", ...
// settle any name still taken. Explicit names are kept as given; the
// chain-file parser rejects duplicates among them.
func assignNames(cs []*Component) {
	used := make(map[string]bool)
	shared := make(map[string]int)
	for _, c := range cs {
		if c.Name != "" {
			used[c.Name] = true
		} else if c.URL == "" {
			shared[programName(c.Command, c.Args)]++
		}
	}
	for _, c := range cs {
		if c.Name != "" {
			continue
		}
		base := programName(c.Command, c.Args)
		if c.URL != "" {
			base = urlName(c.URL)
		}
		// An operand says more only where the program itself is named.
		if (shared[base] > 1 || used[base]) && c.URL == "" && base == defaultName(c.Command) {
			if arg := firstOperand(c.Args); arg != "" {
				base += "-" + arg
			}
		}
		if b, ok := strings.CutPrefix(base, "mcp:"); ok {
			base = "mcp-" + b // the conductor's bridged peers' prefix
		}
		name := base
		for n := 2; used[name] || conductor.ReservedName(name); n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		c.Name, used[name] = name, true
	}
}

// runners are programs that run the program named by their first operand:
// their name says nothing about the component. The value lists the words
// that must follow (npx needs none; pipx needs "run"), and the flags that
// take a value as the next word.
var runners = map[string]struct {
	sub        string
	valueFlags []string
}{
	"env":     {valueFlags: []string{"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}},
	"npx":     {valueFlags: []string{"-p", "--package", "-c", "--call"}},
	"bunx":    {valueFlags: []string{"-p", "--package"}},
	"pnpx":    {},
	"uvx":     {valueFlags: []string{"--from", "--with", "-p", "--python"}},
	"pipx":    {sub: "run", valueFlags: []string{"--spec"}},
	"deno":    {sub: "run"},
	"node":    {valueFlags: []string{"-r", "--require", "--import", "--loader"}},
	"nodejs":  {valueFlags: []string{"-r", "--require", "--import", "--loader"}},
	"bun":     {},
	"python":  {valueFlags: []string{"-W", "-X"}},
	"python3": {valueFlags: []string{"-W", "-X"}},
	"uv":      {sub: "run", valueFlags: []string{"--with", "--python", "-p"}},
	"tsx":     {},
	"ts-node": {},
}

// programName is the default name of a component that runs command with
// args: "env X=1 node ./proxy.mjs" is "proxy", "npx -y @scope/agent-acp@1"
// is "agent-acp", "python3 -m my_proxy" is "my_proxy", "/usr/bin/agent" is
// "agent".
func programName(command string, args []string) string {
	words := append([]string{command}, args...)
	name := defaultName(command)
	for len(words) > 0 {
		r, ok := runners[defaultName(words[0])]
		if !ok {
			return trimName(words[0])
		}
		name = defaultName(words[0])
		words = words[1:]
		if r.sub != "" {
			if len(words) == 0 || words[0] != r.sub {
				return name
			}
			words = words[1:]
		}
		for len(words) > 0 {
			w := words[0]
			switch {
			case name == "env" && isAssignment(w):
				words = words[1:]
				continue
			case (name == "python" || name == "python3") && w == "-m" && len(words) > 1:
				return trimName(words[1])
			case w == "--":
				words = words[1:]
			case strings.HasPrefix(w, "-"):
				words = words[1:]
				if slices.Contains(r.valueFlags, w) && len(words) > 0 {
					words = words[1:]
				}
				continue
			}
			break
		}
	}
	return name
}

func isAssignment(w string) bool {
	_, _, ok := envWord(w)
	return ok
}

// trimName turns a program, script or package into a name: its base name
// without a script's extension, a package's scope or its version.
func trimName(w string) string {
	if at := strings.LastIndexByte(w, '@'); at > 0 {
		w = w[:at] // pkg@1.2.3, @scope/pkg@latest
	}
	base := defaultName(w)
	switch ext := filepath.Ext(base); ext {
	case ".js", ".mjs", ".cjs", ".ts", ".mts", ".py", ".rb", ".sh":
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" {
		return "component"
	}
	return base
}

// firstOperand returns the base name of the first argument that is not a
// flag, or "".
func firstOperand(args []string) string {
	for _, a := range args {
		if a != "" && !strings.HasPrefix(a, "-") {
			return defaultName(a)
		}
	}
	return ""
}
