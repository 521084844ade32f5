package config

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/trace"
)

// EnvPrefix starts the name of every environment variable Load consults.
const EnvPrefix = "ACP_CONDUCTOR_"

// A setting is one scalar that Load layers with viper. Its key is both the
// viper key and the setting's path in a chain file.
type setting struct {
	key   string
	flag  string
	def   any // string, time.Duration or int; also fixes the flag's type
	usage string
}

// settings lists every layered setting; AddFlags, Load and the package
// documentation all follow it.
var settings = []setting{
	{"name", "name", "", "chain name shown in logs"},
	{"logging.level", "log-level", "info", "log level: debug, info, warn or error"},
	{"logging.format", "log-format", "console", "log format: console or json"},
	{"logging.file", "log-file", "", "append logs to this file instead of stderr (never stdout)"},
	{"shutdown_grace", "shutdown-grace", conductor.DefaultGracePeriod, "how long stopping may take: requests in flight finish and components exit; then they are signalled"},
	{"max_message_bytes", "max-message-bytes", wire.DefaultMaxMessageBytes, "largest JSON-RPC message accepted on any connection, in bytes"},
	{"init_timeout", "init-timeout", conductor.DefaultInitTimeout, "how long the chain may take to answer initialize before the component still initializing is failed"},
	{"restart_limit", "restart-limit", conductor.DefaultRestartLimit, "how many times a proxy with on_failure: restart is restarted within restart_window before the chain fails"},
	{"restart_window", "restart-window", conductor.DefaultRestartWindow, "the window restart_limit counts restarts in"},
	{"restart_backoff", "restart-backoff", conductor.DefaultRestartBackoff, "how long a failed proxy with on_failure: restart waits before it starts again; each restart within restart_window of earlier ones waits twice as long, up to restart_backoff_max"},
	{"restart_backoff_max", "restart-backoff-max", conductor.DefaultRestartBackoffMax, "the longest wait before a restart"},
	{"mcp_bridge", "mcp-bridge", string(conductor.BridgeAuto), "how acp MCP servers reach an agent without native MCP-over-ACP: auto, stdio or http"},
	{"mcp_http_idle_timeout", "mcp-http-idle-timeout", mcpbridge.DefaultHTTPIdleTimeout, "how long a bridged MCP HTTP session may go without a request before it ends; 0 keeps it until the client ends it"},
	{"trace.file", "trace", "", "write a trace of every message the chain relays to this file, one JSON event per line (view it with acp-conductor trace view)"},
	{"trace.detail", "trace-detail", string(trace.Full), "how much of each message a trace keeps: full, or metadata (no params, results or error data: safe to share)"},
	{"trace.serve", "trace-serve", "", "serve a live trace viewer on this loopback address, such as 127.0.0.1:0; the URL, with its access token, is logged"},
	{"spin", "spin", DefaultSpin, "how long the relay polls its inputs before it sleeps, so that a fast reply (a proxy's, a local agent's) wakes nothing: lower latency for some CPU while replies come fast; 0 turns spinning off; at most 1ms; agent and proxy only (serve does not spin)"},
}

// envVar returns the environment variable that sets key.
func envVar(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// AddFlags defines on fs a flag for each layered setting but those whose
// keys except names, for Load to find through Options.Flags. Each flag's
// help names its environment variable. A command leaves out the settings
// it does not use, so that a flag for one is refused as unknown rather
// than taken and ignored.
func AddFlags(fs *pflag.FlagSet, except ...string) {
	for _, s := range settings {
		if slices.Contains(except, s.key) {
			continue
		}
		usage := s.usage + " (env " + envVar(s.key) + ")"
		switch def := s.def.(type) {
		case string:
			fs.String(s.flag, def, usage)
		case time.Duration:
			fs.Duration(s.flag, def, usage)
		case int:
			fs.Int(s.flag, def, usage)
		}
	}
}

// An EnvVar is an environment variable that acp-conductor reads, and what
// it sets.
type EnvVar struct {
	Name, Usage string
}

// Environment lists the environment variables a user may set for a chain:
// one per layered setting, from the settings table, so that help made from
// it cannot go stale, and the remote components' token and certificate
// authorities.
func Environment() []EnvVar {
	vars := make([]EnvVar, 0, len(settings)+1)
	for _, s := range settings {
		vars = append(vars, EnvVar{envVar(s.key), s.usage + " (--" + s.flag + ")"})
	}
	return append(vars,
		EnvVar{EnvRemoteToken, "the bearer token of the components given as ws://, wss://, http:// or https:// URLs"},
		EnvVar{EnvExtraCACerts, "a PEM file of certificate authorities that components given as URLs trust besides the system's"},
		EnvVar{EnvServeToken, "the token serve requires of clients, unless --token-file is given"})
}
