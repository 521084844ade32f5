package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A remote component is an ACP endpoint reached over the network rather than
// a program: "url: wss://host/acp" in a chain file, or a command-line
// component that is just such a URL. The conductor runs it as a process like
// any other, its own binary's RemoteCommand, which carries the component's
// stdio to the URL. So routing, ids, dialects, MCP bridging, the failure
// policies (restart reconnects) and shutdown treat it as they treat a
// program, and a chain without one runs exactly as before.
const (
	// RemoteCommand is the hidden acp-conductor command that connects a
	// remote component: "acp-conductor remote-connect URL".
	RemoteCommand = "remote-connect"
	// EnvRemoteHeaders passes the component's headers, a JSON object, to
	// RemoteCommand: they hold credentials, which never go in argv.
	EnvRemoteHeaders = "ACP_CONDUCTOR_REMOTE_HEADERS"
	// EnvRemoteToken is the bearer token of the command-line URL
	// components (a chain file sets headers instead). Load removes it from
	// the environment, so that no other component inherits it.
	EnvRemoteToken = "ACP_CONDUCTOR_REMOTE_TOKEN"
	// EnvRemoteURL passes RemoteCommand a URL with a query or fragment,
	// which may hold a token (?token=...): argv, which every user of the
	// machine can read, then holds the URL without them.
	EnvRemoteURL = "ACP_CONDUCTOR_REMOTE_URL"
	// EnvExtraCACerts names a PEM file of certificate authorities that
	// RemoteCommand trusts besides the system's, on every platform (Go
	// reads SSL_CERT_FILE on Linux only, where it replaces the system's).
	EnvExtraCACerts = "ACP_CONDUCTOR_EXTRA_CA_CERTS"

	// EnvServeToken names the variable serve reads its token from when no
	// --token-file is given.
	EnvServeToken = "ACP_CONDUCTOR_TOKEN"
)

// IsRemote reports whether a command-line component is a URL.
func IsRemote(s string) bool {
	s = strings.TrimSpace(s)
	for _, p := range []string{"ws://", "wss://", "http://", "https://"} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// checkURL reports a URL a remote component cannot connect to. Its errors
// show the URL as shownURL does: they are logged and reach the editor, and
// the credentials a URL is refused for must not come with them.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return fmt.Errorf("not a valid URL: %w", ue.Err) // ue's own text holds s
		}
		return err
	}
	switch strings.ToLower(u.Scheme) {
	case "ws", "wss", "http", "https":
	default:
		return fmt.Errorf("%q: want a ws, wss, http or https URL", shownURL(u))
	}
	if u.Host == "" {
		return fmt.Errorf("%q: no host", shownURL(u))
	}
	if u.User != nil {
		return fmt.Errorf("%s: credentials go in headers, not in the URL", shownURL(u))
	}
	return nil
}

// shownURL is u for messages: no user information (a token may be the
// user name), query or fragment, which may hold credentials.
func shownURL(u *url.URL) string {
	v := *u
	v.User = nil
	v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = "", false, "", ""
	return v.String()
}

// urlName is a remote component's default name: its URL without query.
func urlName(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "remote"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandHeaders replaces each ${VAR} in the header values with the
// variable's value, and reports the variables that are not set.
func expandHeaders(h map[string]string) (map[string]string, []string) {
	var missing []string
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = envRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			val, ok := os.LookupEnv(name)
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
	}
	return out, missing
}

// remoteTokenHeaders gives each command-line URL component the token of
// EnvRemoteToken, and takes the token out of the environment.
func remoteTokenHeaders(comps []*Component) {
	tok, ok := os.LookupEnv(EnvRemoteToken)
	os.Unsetenv(EnvRemoteToken)
	if !ok || strings.TrimSpace(tok) == "" {
		return
	}
	for _, c := range comps {
		if c.URL != "" {
			c.Headers = map[string]string{"Authorization": "Bearer " + strings.TrimSpace(tok)}
		}
	}
}

// remoteConductor returns the process that connects the remote component
// c, in a chain whose messages may be maxBytes long (0: the default) and
// that logs at level ("": info): what its transport logs at debug reaches
// the conductor's log only when the conductor's is at debug too.
func (c Component) remoteConductor(maxBytes int, level string) conductor.Component {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	env := map[string]string{}
	if len(c.Headers) > 0 {
		h, _ := json.Marshal(c.Headers)
		env[EnvRemoteHeaders] = string(h)
	}
	name := c.Name
	if name == "" {
		name = urlName(c.URL)
	}
	args := []string{RemoteCommand}
	if c.PingInterval != nil {
		args = append(args, "--ping-interval", c.PingInterval.String())
	}
	if maxBytes > 0 && maxBytes != wire.DefaultMaxMessageBytes {
		args = append(args, "--max-message-bytes", strconv.Itoa(maxBytes))
	}
	if level != "" && level != "info" {
		args = append(args, "--log-level", level)
	}
	shown := c.URL
	if u, err := url.Parse(c.URL); err == nil && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
		env[EnvRemoteURL] = c.URL
		shown = shownURL(u)
	}
	args = append(args, shown)
	return conductor.Component{
		Name:      name,
		Command:   exe,
		Args:      args,
		Env:       env,
		OnFailure: conductor.Policy(c.OnFailure),
	}
}

// checkRemote checks a chain file's remote component at path, and expands
// its headers.
func (f *File) checkRemote(path string, c *Component) Problems {
	var ps Problems
	add := func(key, format string, args ...any) {
		ps = append(ps, f.problem(f.nodes.line(key), key+": "+format, args...))
	}
	if c.URL == "" {
		add(path+".url", "required with headers (the endpoint to connect to)")
		return ps
	}
	if err := checkURL(c.URL); err != nil {
		add(path+".url", "%v", err)
	}
	for _, key := range []string{"command", "args", "env", "cwd"} {
		if f.nodes.has(path + "." + key) {
			add(path+"."+key, "not allowed with url: a remote component is connected, not run")
		}
	}
	if c.PingInterval != nil && *c.PingInterval < 0 {
		add(path+".ping_interval", "must be positive, or 0 for none, not %s", *c.PingInterval)
	}
	h, missing := expandHeaders(c.Headers)
	for _, name := range missing {
		add(path+".headers", "${%s} is not set in the environment", name)
	}
	c.Headers = h
	return ps
}
