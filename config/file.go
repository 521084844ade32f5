package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// A File is a decoded and checked chain file.
type File struct {
	Name              string        `yaml:"name"`
	Proxies           []Component   `yaml:"proxies"`
	Agent             *Component    `yaml:"agent"`
	Logging           Logging       `yaml:"logging"`
	ShutdownGrace     time.Duration `yaml:"shutdown_grace"`
	MaxMessageBytes   int           `yaml:"max_message_bytes"`
	InitTimeout       time.Duration `yaml:"init_timeout"`
	RestartLimit      int           `yaml:"restart_limit"`
	RestartWindow     time.Duration `yaml:"restart_window"`
	RestartBackoff    time.Duration `yaml:"restart_backoff"`
	RestartBackoffMax time.Duration `yaml:"restart_backoff_max"`
	MCPBridge         string        `yaml:"mcp_bridge"`
	MCPHTTPIdle       time.Duration `yaml:"mcp_http_idle_timeout"`
	Trace             Trace         `yaml:"trace"`
	Spin              time.Duration `yaml:"spin"`

	path  string
	nodes index // where each key sits, for messages and for layering
	// mistyped holds the keys whose values had the wrong type: their
	// fields hold zero values, which validate does not judge.
	mistyped map[string]bool
	// bareZeros counts the durations written as a bare 0, which the
	// decoder refuses as numbers but which are 0 in any unit: their
	// fields hold 0, as meant.
	bareZeros int
}

// Logging says where diagnostics go and how much of them.
type Logging struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // console or json
	File   string `yaml:"file"`   // empty means stderr
}

// Trace says whether and how the chain's messages are traced.
type Trace struct {
	File   string `yaml:"file"`   // empty: no trace file
	Detail string `yaml:"detail"` // full or metadata
	Serve  string `yaml:"serve"`  // a loopback address for the live viewer; empty: none
}

// Values accepted for the logging settings.
var (
	Levels  = []string{"debug", "info", "warn", "error"}
	Formats = []string{"console", "json"}
)

// MinMessageBytes is the smallest max_message_bytes accepted: below it not
// even an initialize exchange fits.
const MinMessageBytes = 1 << 10

// DefaultSpin is how long, unless the spin setting says otherwise, the relay
// of an agent or proxy chain polls its inputs before it sleeps, so that a
// proxy's or a local agent's reply within it wakes nothing. It was 50µs
// until a slower VM's replies through 3 and 10 proxies came later than
// that: spinning then stayed off, as it turns back on only after a wait
// ends within the bound (bench/README.md). MaxSpin is the longest spin
// accepted: a reply later than that is not a fast one, and a longer spin
// would only hold a CPU.
const (
	DefaultSpin = 100 * time.Microsecond
	MaxSpin     = time.Millisecond
)

// Parse decodes and checks the chain file data, read from path (used only in
// messages). It checks everything that does not depend on the mode; see
// Check for the rest. Its error, if any, is a Problems listing every problem
// it found.
func Parse(path string, data []byte) (*File, error) {
	f, ps := parse(path, data)
	if len(ps) > 0 {
		return nil, ps
	}
	return f, nil
}

// parse is Parse, returning with the problems what could be decoded (nil
// if the YAML itself is invalid), so that the checks after it still run.
func parse(path string, data []byte) (*File, Problems) {
	f := &File{path: path}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{f.syntaxProblem(err)}
	}
	f.nodes = newIndex(&root)

	// Decode again through a Decoder, the only way to have yaml refuse
	// unknown keys. It keeps going past type errors, so everything it could
	// decode still gets checked below.
	var ps Problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	switch err := dec.Decode(f); {
	case errors.Is(err, io.EOF): // an empty file is an empty chain
		return f, nil
	case err != nil:
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, Problems{f.syntaxProblem(err)}
		}
		// The decoder found keys or values File cannot take; the nodes say
		// which, and where. Should they not (the decoder is the judge), its
		// own words are better than none, unless what it refused was only
		// durations written as a bare 0.
		if ps = f.typeProblems(&root); len(ps) == 0 && len(te.Errors) > f.bareZeros {
			for _, msg := range te.Errors {
				ps = append(ps, f.problem(0, "%s", msg))
			}
		}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		ps = append(ps, f.problem(extra.Line, "a chain file holds one YAML document; remove the second"))
	case !errors.Is(err, io.EOF):
		ps = append(ps, f.syntaxProblem(err))
	}
	return f, append(ps, f.validate()...)
}

// Check reports the problems that depend on the mode the chain runs in.
func (f *File) Check(mode conductor.Mode) error {
	return f.check(mode).err()
}

func (f *File) check(mode conductor.Mode) Problems {
	var ps Problems
	switch {
	case mode == conductor.AgentMode && f.Agent == nil:
		if f.mistyped["agent"] {
			break // its type problem says what is wrong
		}
		if e, ok := f.nodes["agent"]; ok {
			ps = append(ps, f.problem(e.key.Line, "agent: needs at least a command"))
		} else {
			ps = append(ps, f.problem(0, "agent: required in agent mode (add an agent: section with a command)"))
		}
	case mode == conductor.ProxyMode && f.Agent != nil:
		ps = append(ps, f.agentInProxyMode())
	}
	return ps
}

func (f *File) agentInProxyMode() Problem {
	return f.problem(f.nodes.line("agent"), "agent: not allowed in proxy mode, where the parent conductor supplies the successor")
}

func (f *File) problem(line int, format string, args ...any) Problem {
	return Problem{File: f.path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// syntaxProblem turns a yaml parse error, "yaml: line 3: did not find
// expected key", into a Problem on that line.
func (f *File) syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, rest := cutLine(msg)
	return f.problem(line, "invalid YAML: %s", rest)
}

// cutLine splits "line N: rest" as the yaml package writes its messages.
func cutLine(msg string) (int, string) {
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, rest, _ := strings.Cut(msg, ": ")
		return line, rest
	}
	return 0, msg
}
