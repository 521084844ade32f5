package conductor

import (
	"time"

	"go.uber.org/zap"
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
	// GracePeriod is how long shutdown waits after closing a component's stdin
	// before signalling its process group. Zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// MaxMessageBytes bounds one message on any connection. Zero means
	// wire.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// InitTimeout bounds how long the chain may take to answer the client's
	// initialize; the component still initializing then is failed.
	InitTimeout time.Duration
	// RestartLimit and RestartWindow bound PolicyRestart.
	RestartLimit  int
	RestartWindow time.Duration
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
	// Supervisor, if set, is an acp-conductor binary to run each component
	// under ("acp-conductor component-supervisor -- CMD..."), so that even
	// SIGKILL of the conductor leaves no grandchild behind (Linux). The CLI
	// sets it to itself; a program embedding Run leaves it empty unless its
	// binary calls Supervise for that argument.
	Supervisor string
}

// Defaults for the zero values of Config.
const (
	DefaultGracePeriod   = 2 * time.Second
	DefaultInitTimeout   = 60 * time.Second
	DefaultRestartLimit  = 3
	DefaultRestartWindow = time.Minute
)
