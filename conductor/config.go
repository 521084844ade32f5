package conductor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/trace"
)

// Mode says which role the conductor plays toward its own client.
type Mode int

const (
	// AgentMode: the conductor owns the proxies and the final agent and
	// expects "initialize" from an editor.
	AgentMode Mode = iota
	// ProxyMode: the conductor owns only proxies, expects "proxy/initialize"
	// from a parent conductor, and sends the last proxy's successor traffic
	// up to that parent.
	ProxyMode
)

func (m Mode) String() string {
	if m == ProxyMode {
		return "proxy"
	}
	return "agent"
}

// A Component is one subprocess of the chain.
type Component struct {
	Name    string            // used in logs and errors; defaults to the command's base name
	Command string            // program, looked up in PATH
	Args    []string          // arguments after the program
	Env     map[string]string // added to (overriding) the conductor's environment
	Dir     string            // working directory; empty means the conductor's

	// OnFailure says what happens when the component exits, closes its
	// output or does not answer initialize in time. Empty means PolicyFail.
	OnFailure Policy
}

// A Policy is what the conductor does when a component fails.
type Policy string

const (
	// PolicyFail answers everything pending, then stops the chain with an
	// error (the conductor exits non-zero).
	PolicyFail Policy = "fail"
	// PolicyRestart starts a proxy again and replays its initialization,
	// up to Config.RestartLimit times within Config.RestartWindow; then fail.
	// Restarts are spaced by an exponential back-off (Config.RestartBackoff).
	PolicyRestart Policy = "restart"
	// PolicyBypass takes a proxy out of the chain: its predecessor then talks
	// to its successor.
	PolicyBypass Policy = "bypass"
)

// Config describes a chain.
type Config struct {
	Mode    Mode
	Proxies []Component
	Agent   Component // AgentMode only

	// Logger receives diagnostics and the components' stderr. Nil discards.
	Logger *zap.Logger
	// GracePeriod bounds the orderly part of shutdown: requests in flight
	// get until then to be answered, and the components until then to exit
	// after their stdin closes, before their process groups are signalled.
	// Zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// Abort, when closed during shutdown, skips what is left of the grace
	// period: the components are signalled at once. acp-conductor closes it
	// on a second SIGINT or SIGTERM. Run's ctx ending and the client's
	// input ending, once both have, in either order, do the same; a cause
	// of ctx's that has a Signal() os.Signal method is then logged as that
	// signal alone.
	Abort <-chan struct{}
	// MaxMessageBytes bounds one message on any connection. Zero means
	// wire.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// InitTimeout bounds how long the chain may take to answer the client's
	// initialize; the component still initializing then is failed.
	InitTimeout time.Duration
	// RestartLimit and RestartWindow bound PolicyRestart.
	RestartLimit  int
	RestartWindow time.Duration
	// RestartBackoff is how long a failed proxy waits before it is started
	// again; each restart within RestartWindow of earlier ones waits twice
	// as long as the one before, up to RestartBackoffMax. What is sent to
	// the proxy meanwhile queues for the new process. Zero means
	// DefaultRestartBackoff and DefaultRestartBackoffMax; a maximum below
	// RestartBackoff is raised to it.
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// MCPBridge selects how acp MCP servers reach an agent without native
	// MCP-over-ACP support. Empty means BridgeAuto.
	MCPBridge BridgeMode
	// MCPHTTPIdle ends a bridged MCP HTTP session that has had no request
	// for that long, since a client that vanished without ending its
	// session never says so. Zero means mcpbridge.DefaultHTTPIdleTimeout;
	// negative keeps sessions until their client ends them.
	MCPHTTPIdle time.Duration
	// ShimExecutable is the acp-conductor binary that stdio-bridged MCP
	// servers run as their shim ("acp-conductor mcp-shim"). Empty means the
	// running executable.
	ShimExecutable string
	// Supervisor, if set, turns on the chain's watchdog (package
	// supervisor: one per chain), so that even SIGKILL of the conductor
	// leaves nothing a component started behind, and so that what a
	// component leaves in a session of its own is killed at the chain's
	// end. On Linux it is an acp-conductor binary, which the watchdog runs
	// to sweep; elsewhere the watchdog, a shell, kills the components'
	// process groups alone. The CLI sets it to itself; a program embedding
	// Run leaves it empty unless its binary calls supervisor.Run first
	// thing in main.
	Supervisor string
	// Trace, if set, records every message the chain relays (package
	// trace). Run does not close it.
	Trace *trace.Recorder

	// restartWait, if set, replaces the timer of a restart's back-off, for
	// tests: it waits d, or until stop is closed, and reports whether the
	// wait ran out.
	restartWait func(d time.Duration, stop <-chan struct{}) bool
	// exitWait, if set, replaces the timer of the shutdown's wait for the
	// processes it signalled to exit, for tests: what it returns fires
	// when the wait of d is up.
	exitWait func(d time.Duration) <-chan time.Time
	// bypassHold, if set, runs once a bypassed proxy's calls are taken,
	// before its initializes are sent on, for tests: it may hold them there.
	bypassHold func()
	// bridgeAccept, if set, runs before each bridged MCP connection the
	// bridge admits is served, for tests: it may hold one there.
	bridgeAccept func(*mcpbridge.Conn)
	// running, if set, sees the chain before it relays anything, for
	// tests that look at what it keeps.
	running func(*chain)
}

// Defaults for the zero values of Config.
const (
	DefaultGracePeriod   = 2 * time.Second
	DefaultInitTimeout   = 60 * time.Second
	DefaultRestartLimit  = 3
	DefaultRestartWindow = time.Minute

	DefaultRestartBackoff    = 100 * time.Millisecond
	DefaultRestartBackoffMax = 5 * time.Second
)

// validate reports a Config that Run cannot start. It changes nothing: the
// zero values of the durations and limits stand for their defaults, which
// the accessors below apply.
func (cfg *Config) validate() error {
	for i, c := range cfg.Proxies {
		if c.Command == "" {
			return fmt.Errorf("proxy %d: no command", i)
		}
	}
	if cfg.Mode == AgentMode {
		if cfg.Agent.Command == "" {
			return errors.New("agent mode needs an agent command")
		}
		if p := cfg.Agent.OnFailure; p != "" && p != PolicyFail {
			return fmt.Errorf("agent %q: on_failure %q: only a proxy can be restarted or bypassed", componentName(cfg.Agent), p)
		}
	}
	for _, c := range cfg.Proxies {
		switch c.OnFailure {
		case "", PolicyFail, PolicyRestart, PolicyBypass:
		default:
			return fmt.Errorf("proxy %q: unknown on_failure policy %q", componentName(c), c.OnFailure)
		}
	}
	return nil
}

func (cfg *Config) grace() time.Duration {
	return orDefault(cfg.GracePeriod, DefaultGracePeriod)
}

func (cfg *Config) initTimeout() time.Duration {
	return orDefault(cfg.InitTimeout, DefaultInitTimeout)
}

func (cfg *Config) restartLimit() int {
	return orDefault(cfg.RestartLimit, DefaultRestartLimit)
}

func (cfg *Config) restartWindow() time.Duration {
	return orDefault(cfg.RestartWindow, DefaultRestartWindow)
}

func (cfg *Config) restartBackoff() (first, most time.Duration) {
	first = orDefault(cfg.RestartBackoff, DefaultRestartBackoff)
	return first, max(first, orDefault(cfg.RestartBackoffMax, DefaultRestartBackoffMax))
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// The names of the conductor's own peers, which logs and traces name them
// by: a component may not take one.
const (
	clientName    = "client"    // the editor, or the parent conductor
	conductorName = "conductor" // the conductor, for requests it makes itself
	bridgedPrefix = "mcp:"      // a bridged MCP client, then its server's name (see bridgedNames)
)

// ReservedName reports whether a component may not be called name, one the
// conductor gives peers of its own: with it, a trace could not tell the
// component's messages from theirs, nor pair its requests and responses.
func ReservedName(name string) bool {
	return name == clientName || name == conductorName || strings.HasPrefix(name, bridgedPrefix)
}
