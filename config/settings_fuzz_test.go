package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// settingOf returns what c holds for the setting key, as text a check
// reads the same way.
func settingOf(c *Config, key string) any {
	return map[string]any{
		"name": c.Name, "logging.level": c.Logging.Level, "logging.format": c.Logging.Format, "logging.file": c.Logging.File,
		"shutdown_grace": c.ShutdownGrace, "max_message_bytes": c.MaxMessageBytes, "init_timeout": c.InitTimeout,
		"restart_limit": c.RestartLimit, "restart_window": c.RestartWindow, "restart_backoff": c.RestartBackoff,
		"restart_backoff_max": c.RestartBackoffMax, "mcp_bridge": c.MCPBridge, "mcp_http_idle_timeout": c.MCPHTTPIdle,
		"trace.file": c.Trace.File, "trace.detail": c.Trace.Detail, "trace.serve": c.Trace.Serve,
		"spin": c.Spin,
	}[key]
}

// FuzzSettings sets one setting, by its environment variable or its flag,
// to anything. Load refuses it exactly when the setting's check does, with
// a problem naming the variable or flag; and what it accepts is the value
// the chain gets, read as the check read it, whatever viper makes of it.
func FuzzSettings(f *testing.F) {
	f.Add(uint8(4), " 3s ", false)
	f.Add(uint8(5), "0x100000", true)
	f.Add(uint8(7), "+5", false)
	f.Add(uint8(1), "debug", true)
	f.Add(uint8(12), "0", false)
	f.Add(uint8(15), "127.0.0.1:0", false)
	f.Add(uint8(16), "1001us", true)
	f.Add(uint8(16), "0", false)
	f.Fuzz(func(t *testing.T, which uint8, value string, byFlag bool) {
		s := settings[int(which)%len(settings)]
		if strings.ContainsRune(value, 0) {
			return // no environment or argument holds a NUL
		}
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		fs.SetOutput(nilWriter{})
		AddFlags(fs)
		if byFlag {
			if err := fs.Parse([]string{"--" + s.flag + "=" + value}); err != nil {
				return // pflag refuses it before Load sees it
			}
		}
		for _, other := range settings {
			if other.key != s.key || byFlag {
				t.Setenv(envVar(other.key), "") // only this one is set: empty is unset
			}
		}
		if !byFlag {
			t.Setenv(envVar(s.key), value)
		}
		checked := value
		if byFlag {
			checked = fs.Lookup(s.flag).Value.String()
		}
		wantErr := checks[s.key](checked)
		if !byFlag && value == "" {
			wantErr = nil // an empty variable counts as unset
		}
		c, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"agent"}, Flags: fs})
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%s = %q: Load says %v, its check %v", s.key, value, err, wantErr)
		}
		if err != nil {
			where := "environment variable " + envVar(s.key)
			if byFlag {
				where = "flag --" + s.flag
			}
			if !strings.Contains(err.Error(), where) {
				t.Fatalf("%s = %q: %v does not name the %s", s.key, value, err, where)
			}
			return
		}
		if !byFlag && value == "" {
			return
		}
		var want any = strings.TrimSpace(checked)
		switch s.def.(type) {
		case time.Duration:
			want, _ = duration(checked)
		case int:
			want, _ = integer(checked)
		case string:
			want = checked
		}
		if got := settingOf(c, s.key); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s = %q: the chain gets %v, the check read %v", s.key, value, got, want)
		}
	})
}

type nilWriter struct{}

func (nilWriter) Write(p []byte) (int, error) { return len(p), nil }
