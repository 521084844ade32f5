package config

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// A Config is a chain ready to run: every component named, every setting
// layered and checked.
type Config struct {
	Name            string
	Mode            conductor.Mode
	Proxies         []Component // nearest the editor first
	Agent           Component   // AgentMode only
	Logging         Logging
	ShutdownGrace   time.Duration
	MaxMessageBytes int
	// MaxMessageBytesFrom says where MaxMessageBytes was set, as SpinFrom
	// does, or "" for its default: serve's default is lower.
	MaxMessageBytesFrom string
	InitTimeout         time.Duration
	RestartLimit        int
	RestartWindow       time.Duration
	RestartBackoff      time.Duration
	RestartBackoffMax   time.Duration
	MCPBridge           string
	MCPHTTPIdle         time.Duration // 0: sessions end only when their client ends them
	Trace               Trace
	Spin                time.Duration // how long the relay polls before it sleeps; 0: it does not
	SpinFrom            string        // where Spin was set ("environment variable ACP_CONDUCTOR_SPIN", say), or "" for its default
	File                string        // the chain file, or "" if the chain came from arguments
	// LogFileFrom and TraceFileFrom say where Logging.File and Trace.File
	// were set, as SpinFrom does, for an error opening them to name.
	LogFileFrom   string
	TraceFileFrom string
}

// Conductor returns the conductor's configuration for c, logging to log.
func (c *Config) Conductor(log *zap.Logger) conductor.Config {
	cc := conductor.Config{
		Mode:              c.Mode,
		Proxies:           make([]conductor.Component, len(c.Proxies)),
		Logger:            log,
		GracePeriod:       c.ShutdownGrace,
		MaxMessageBytes:   c.MaxMessageBytes,
		InitTimeout:       c.InitTimeout,
		RestartLimit:      c.RestartLimit,
		RestartWindow:     c.RestartWindow,
		RestartBackoff:    c.RestartBackoff,
		RestartBackoffMax: c.RestartBackoffMax,
		MCPBridge:         conductor.BridgeMode(c.MCPBridge),
		MCPHTTPIdle:       c.MCPHTTPIdle,
	}
	if c.MCPHTTPIdle == 0 {
		cc.MCPHTTPIdle = -1 // the conductor's zero is the default
	}
	for i, p := range c.Proxies {
		cc.Proxies[i] = p.conductor(c.MaxMessageBytes, c.Logging.Level)
	}
	if c.Mode == conductor.AgentMode {
		cc.Agent = c.Agent.conductor(c.MaxMessageBytes, c.Logging.Level)
	}
	return cc
}

// Summary describes the chain in one line, such as "2 proxies, agent claude".
func (c *Config) Summary() string {
	s := plural(len(c.Proxies), "proxy", "proxies")
	if c.Mode == conductor.AgentMode {
		return s + ", agent " + c.Agent.Name
	}
	return s + " (proxy mode)"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
