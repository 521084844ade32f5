package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/conductor"
)

func TestRemoteComponentArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"wss://box.example/acp", ""},
		{" ws://127.0.0.1:8765/acp ", ""},
		{"HTTPS://box.example/acp", ""},
		{"https://user:pw@box.example/acp", "credentials go in headers"},
		{"http:///acp", "no host"},
	} {
		c, err := ParseComponent(tc.in)
		switch {
		case tc.want == "" && (err != nil || c.URL != strings.TrimSpace(tc.in) || c.Command != ""):
			t.Errorf("ParseComponent(%q) = %+v, %v", tc.in, c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ParseComponent(%q) error = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestRemoteURLErrorsHideCredentials: a URL refused as a component, on the
// command line or in a chain file, is shown in the error (which is logged,
// and sent to the editor) without its password, query or fragment, where
// credentials may be: refusing them must not print them.
func TestRemoteURLErrorsHideCredentials(t *testing.T) {
	for _, in := range []string{
		"https://user:s3cretpw@box.example/acp?token=s3crettok#s3cretfrag",
		"wss://s3crettoken@box.example/acp", // a token as the user name
		"ws://user:s3cretpw@/acp?token=s3crettok",
		"ftp://user:s3cretpw@box.example/acp?token=s3crettok",
		"ws://user:s3cretpw@box.example:port/acp?token=s3crettok",
	} {
		if IsRemote(in) { // ftp:// is a command there
			_, err := ParseComponent(in)
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseComponent(%q) error = %v, want one without the credentials", in, err)
			}
		}
		_, err := Parse("chain.yaml", []byte("agent:\n  url: "+in+"\n"))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("a chain file's url %s: error = %v, want one without the credentials", in, err)
		}
	}
}

// TestRemoteComponentRuns checks what the conductor is given for a remote
// component: this binary's RemoteCommand with the URL as its argument and
// the headers, secrets included, in its environment only, as is a URL with
// a query, its argument then the URL without it.
func TestRemoteComponentRuns(t *testing.T) {
	t.Setenv(EnvRemoteToken, "t0k")
	cfg, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"wss://a.example/acp?x=1", "ws://b.example:9/acp"}})
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.Conductor(nil)
	p, a := cc.Proxies[0], cc.Agent
	if p.Name != "wss://a.example/acp" || a.Name != "ws://b.example:9/acp" {
		t.Errorf("names %q, %q", p.Name, a.Name)
	}
	if !reflect.DeepEqual(a.Args, []string{RemoteCommand, "ws://b.example:9/acp"}) || strings.Contains(strings.Join(a.Args, " "), "t0k") {
		t.Errorf("agent args %q", a.Args)
	}
	if a.Env[EnvRemoteHeaders] != `{"Authorization":"Bearer t0k"}` {
		t.Errorf("agent env %q", a.Env)
	}
	// A query may hold a token too: argv shows the URL without it.
	if !reflect.DeepEqual(p.Args, []string{RemoteCommand, "wss://a.example/acp"}) || p.Env[EnvRemoteURL] != "wss://a.example/acp?x=1" {
		t.Errorf("proxy args %q, env %q", p.Args, p.Env)
	}
	if _, ok := a.Env[EnvRemoteURL]; ok {
		t.Errorf("agent env %q: a URL with no query is in argv alone", a.Env)
	}
	if v, ok := lookupEnv(EnvRemoteToken); ok {
		t.Errorf("%s still set (%q): every component would inherit it", EnvRemoteToken, v)
	}
}

// TestRemoteTokenFromFileChain: with a chain file too, the token leaves
// the environment, after the file's headers had their chance to name it.
func TestRemoteTokenFromFileChain(t *testing.T) {
	t.Setenv(EnvRemoteToken, "t0k")
	path := writeChain(t, "agent:\n  url: wss://box.example/acp\n  headers: {Authorization: \"Bearer ${"+EnvRemoteToken+"}\"}\n")
	cfg, err := Load(Options{Mode: conductor.AgentMode, File: path})
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Conductor(nil).Agent; a.Env[EnvRemoteHeaders] != `{"Authorization":"Bearer t0k"}` {
		t.Errorf("agent env %q", a.Env)
	}
	if v, ok := lookupEnv(EnvRemoteToken); ok {
		t.Errorf("%s still set (%q): every component would inherit it", EnvRemoteToken, v)
	}
}

func TestRemoteComponentFile(t *testing.T) {
	t.Setenv("ACP_TEST_TOKEN", "abc")
	f, err := Parse("chain.yaml", []byte(`
agent:
  url: wss://box.example/acp
  headers: {Authorization: "Bearer ${ACP_TEST_TOKEN}", X-Other: "plain"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Agent.Headers; got["Authorization"] != "Bearer abc" || got["X-Other"] != "plain" {
		t.Errorf("headers %q", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"agent:\n  url: wss://h/acp\n  command: x\n", "chain.yaml:3: agent.command: not allowed with url"},
		{"agent:\n  headers: {A: b}\n", "agent.url: required with headers"},
		{"agent:\n  url: ftp://h/acp\n", "want a ws, wss, http or https URL"},
		{"agent:\n  url: wss://h/acp\n  ping_interval: -1s\n", "chain.yaml:3: agent.ping_interval: must be positive, or 0 for none"},
		{"agent:\n  url: wss://h/acp\n  ping_interval: often\n", "agent.ping_interval"},
		{"agent:\n  command: x\n  ping_interval: 5s\n", "chain.yaml:3: agent.ping_interval: only for a remote component (url)"},
		{"agent:\n  url: wss://h/acp\n  headers: {A: \"${ACP_TEST_UNSET_VAR}\"}\n", "${ACP_TEST_UNSET_VAR} is not set"},
	} {
		_, err := Parse("chain.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestRemoteConnectArgs: a chain file's ping_interval, and the chain's
// max_message_bytes (which remote-connect must carry) and logging level
// (which its transport logs at), reach remote-connect's flags; without
// them each flag is left to its default.
func TestRemoteConnectArgs(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"agent:\n  url: wss://h/acp\n", []string{RemoteCommand, "wss://h/acp"}},
		{"agent:\n  url: wss://h/acp\n  ping_interval: 5s\n", []string{RemoteCommand, "--ping-interval", "5s", "wss://h/acp"}},
		{"agent:\n  url: wss://h/acp\n  ping_interval: 0s\n", []string{RemoteCommand, "--ping-interval", "0s", "wss://h/acp"}},
		{"agent: {url: wss://h/acp}\nmax_message_bytes: 134217728\n", []string{RemoteCommand, "--max-message-bytes", "134217728", "wss://h/acp"}},
		{"agent: {url: wss://h/acp, ping_interval: 5s}\nmax_message_bytes: 4096\n", []string{RemoteCommand, "--ping-interval", "5s", "--max-message-bytes", "4096", "wss://h/acp"}},
		{"agent: {url: wss://h/acp}\nlogging: {level: debug}\n", []string{RemoteCommand, "--log-level", "debug", "wss://h/acp"}},
		{"agent: {url: wss://h/acp}\nlogging: {level: info}\n", []string{RemoteCommand, "wss://h/acp"}},
	} {
		cfg, err := Load(Options{Mode: conductor.AgentMode, File: writeChain(t, tc.yaml)})
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := cfg.Conductor(nil).Agent.Args; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: args %q, want %q", tc.yaml, got, tc.want)
		}
	}
}

func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }
