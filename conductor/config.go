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
}

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
}

// DefaultGracePeriod is the default for Config.GracePeriod.
const DefaultGracePeriod = 2 * time.Second
