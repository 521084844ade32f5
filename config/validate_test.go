package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// TestUnknownEnv reports an ACP_CONDUCTOR_ variable no setting reads, and
// not those the conductor sets for the processes it starts (a nested
// conductor inherits them).
func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"ACP_CONDUCTOR_SHUTDOWN_GRACE=1s",
		"ACP_CONDUCTOR_CHAIN=1f,2e",
		"ACP_CONDUCTOR_COMPONENT=1f.2,2e.1", // a nested conductor's, set by its parent
		"ACP_CONDUCTOR_SHUTDOWN_GARCE=1s",
		"HOME=/root",
	})
	if want := []string{"ACP_CONDUCTOR_SHUTDOWN_GARCE"}; !slices.Equal(got, want) {
		t.Errorf("UnknownEnv = %q, want %q", got, want)
	}
}

// TestLogFileHintEmptyEnv: an empty ACP_CONDUCTOR_LOGGING_FILE counts as
// unset, as it does for every setting: the chain file's log file is the
// hint.
func TestLogFileHintEmptyEnv(t *testing.T) {
	t.Setenv("ACP_CONDUCTOR_LOGGING_FILE", "")
	path := writeChain(t, "agent: {command: a}\nlogging: {file: /tmp/from-file.log}\n")
	if got := LogFileHint(path, nil); got != "/tmp/from-file.log" {
		t.Errorf("LogFileHint = %q, want the file's", got)
	}
}

// TestValidateOnePass: every problem comes out of one run, for every
// component and layer, so that fixing one does not reveal the next: the
// file's keys and values, the mode, the environment's settings, what Lint
// finds and programs not found.
func TestValidateOnePass(t *testing.T) {
	clearEnv(t)
	t.Setenv("ACP_CONDUCTOR_LOGGING_FORMAT", "xml")
	t.Setenv("ACP_CONDUCTOR_SHUTDOWN_GRAEC", "1s")
	path := writeChain(t, `proxies:
  - name: p
    command: no-such-proxy-qa4
    on_failure: retry
    agrs: [x]
  - command: ~/bin/q
  - command: [not, a, string]
agent:
  command: no-such-agent-qa4
  on_failure: restart
logging: {level: loud}
`)
	for _, tc := range []struct {
		mode conductor.Mode
		want []string
	}{
		{conductor.AgentMode, []string{
			`chain.yaml:5: unknown key "agrs" in proxies[0]`,
			`chain.yaml:4: proxies[0].on_failure: invalid policy "retry"`,
			`chain.yaml:7: proxies[2].command:`,
			`chain.yaml:10: agent.on_failure: "restart" is for proxies`,
			`chain.yaml:11: logging.level: invalid level "loud"`,
			`logging.format: invalid format "xml": want one of console, json (from environment variable ACP_CONDUCTOR_LOGGING_FORMAT)`,
			`proxy "q" (` + path + `:6): command "~/bin/q": ~ is not expanded`,
			`environment variable ACP_CONDUCTOR_SHUTDOWN_GRAEC names no setting`,
			`proxy "p" (` + path + `:2): command "no-such-proxy-qa4" not found in PATH`,
			`agent "no-such-agent-qa4" (` + path + `:8): command "no-such-agent-qa4" not found in PATH`,
		}},
		{conductor.ProxyMode, []string{
			`chain.yaml:8: agent: not allowed in proxy mode`,
			`chain.yaml:4: proxies[0].on_failure: invalid policy "retry"`,
			`proxy "p" (` + path + `:2): command "no-such-proxy-qa4" not found in PATH`,
		}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			c, errs, _ := Validate(Options{Mode: tc.mode, File: path}, true)
			if c != nil {
				t.Errorf("Validate returned a chain with problems")
			}
			got := errs.Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems lack %q:\n%s", w, got)
				}
			}
			// A component whose command is a problem already is not
			// looked for too.
			if strings.Contains(got, `command "" not found`) {
				t.Errorf("a mistyped command is looked for:\n%s", got)
			}
		})
	}
}

// TestLoadEveryLayer: Load reports the file's problems and the
// environment's together, not the second only once the first are fixed.
func TestLoadEveryLayer(t *testing.T) {
	clearEnv(t)
	t.Setenv("ACP_CONDUCTOR_SPIN", "5s")
	path := writeChain(t, "agent: {command: a, on_failure: retry}\n")
	_, err := Load(Options{Mode: conductor.AgentMode, File: path})
	for _, w := range []string{`agent.on_failure: invalid policy "retry"`, `spin: must be at most 1ms, got 5s`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Load error = %v\nwant it to contain %q", err, w)
		}
	}
}

// TestValidateGood: a good chain has no problems, and is returned.
func TestValidateGood(t *testing.T) {
	clearEnv(t)
	c, errs, warnings := Validate(Options{Mode: conductor.AgentMode, File: writeChain(t, "proxies: [{command: cat}]\nagent: {command: sh, cwd: /}\n")}, true)
	if c == nil || len(errs) > 0 || len(warnings) > 0 {
		t.Fatalf("Validate = %v, %v, %v; want the chain alone", c, errs, warnings)
	}
	if got := c.Summary(); got != "1 proxy, agent sh" {
		t.Errorf("Summary = %q", got)
	}
}
