// Package integration tests acp-conductor against ACP peers nobody here
// wrote: the official TypeScript SDK (@agentclientprotocol/sdk) as both the
// editor and the agent, with passthrough proxies in Python and Go between
// them. See README.md.
package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Paths filled in by TestMain.
var (
	repoRoot  string // the module root
	peersDir  string // integration/peers
	binDir    string // temporary directory with the built binaries
	conductor string // built acp-conductor, or "" if it did not build
	goProxy   string // built testdata/goproxy
	twProxy   string // built testdata/twproxy: a Thinkwell-dialect proxy with an MCP server
	libProxy  string // built testdata/libproxy (the project's proxy library), or ""
	nodeBin   string
	python    string

	conductorBuildErr error
	libProxyBuildErr  error
)

func TestMain(m *testing.M) {
	// Race-built binaries sleep a second on exit to flush reports; with
	// the chain's watchdog that doubles, and eats the shutdown grace.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	fatal := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "integration: "+format+"\n", args...)
		return 1
	}
	wd, err := os.Getwd()
	if err != nil {
		return fatal("%v", err)
	}
	repoRoot = filepath.Dir(wd)
	peersDir = filepath.Join(wd, "peers")

	// The peers are real programs in other languages; without their runtimes
	// these tests cannot say anything, so they fail rather than skip.
	if nodeBin, err = exec.LookPath("node"); err != nil {
		return fatal("node (>= 20) is required for the integration tests: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fatal("npm is required for the integration tests: %v", err)
	}
	if python, err = exec.LookPath("python3"); err != nil {
		return fatal("python3 is required for the integration tests: %v", err)
	}
	if err := ensureNodeModules(npm); err != nil {
		return fatal("%v", err)
	}

	binDir, err = os.MkdirTemp("", "acp-it-bin-")
	if err != nil {
		return fatal("%v", err)
	}
	defer os.RemoveAll(binDir)

	goProxy = filepath.Join(binDir, "goproxy")
	if out, err := goBuild(goProxy, "./integration/testdata/goproxy"); err != nil {
		return fatal("building the Go test proxy: %v\n%s", err, out)
	}
	twProxy = filepath.Join(binDir, "twproxy")
	if out, err := goBuild(twProxy, "./integration/testdata/twproxy"); err != nil {
		return fatal("building the Thinkwell-dialect test proxy: %v\n%s", err, out)
	}
	lib := filepath.Join(binDir, "libproxy")
	if out, err := goBuild(lib, "./integration/testdata/libproxy"); err != nil {
		libProxyBuildErr = fmt.Errorf("building testdata/libproxy (package proxy): %v\n%s", err, out)
		fmt.Fprintf(os.Stderr, "integration: %v\n", libProxyBuildErr)
	} else {
		libProxy = lib
	}
	bin := filepath.Join(binDir, "acp-conductor")
	if pre := os.Getenv("ACP_IT_CONDUCTOR"); pre != "" {
		// A prebuilt conductor (an installed one, say) instead of ./cmd.
		if conductor, err = exec.LookPath(pre); err != nil {
			return fatal("ACP_IT_CONDUCTOR: %v", err)
		}
		if conductor, err = filepath.Abs(conductor); err != nil {
			return fatal("ACP_IT_CONDUCTOR: %v", err)
		}
	} else if out, err := goBuild(bin, "./cmd/acp-conductor"); err != nil {
		// Tests that need the conductor fail with this; the others still run.
		conductorBuildErr = fmt.Errorf("building ./cmd/acp-conductor: %v\n%s", err, out)
		fmt.Fprintf(os.Stderr, "integration: %v\n", conductorBuildErr)
	} else {
		conductor = bin
	}
	return m.Run()
}

// goBuild builds pkg (relative to the module root) to out, with the race
// detector when this test binary has it, so that the conductor's own races
// show up in these end-to-end runs too.
func goBuild(out, pkg string) ([]byte, error) {
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = repoRoot
	return cmd.CombinedOutput()
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// ensureNodeModules runs `npm ci` when node_modules is missing or older than
// package-lock.json, so that a fresh clone needs only `go test`.
func ensureNodeModules(npm string) error {
	lock, err := os.Stat(filepath.Join(peersDir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("integration/peers/package-lock.json: %v", err)
	}
	// npm writes node_modules/.package-lock.json on every install.
	installed, err := os.Stat(filepath.Join(peersDir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		if _, err := os.Stat(filepath.Join(peersDir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err == nil {
			return nil
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = peersDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in integration/peers: %v\n%s", err, out.String())
	}
	return nil
}

// requireConductor fails t when the conductor did not build.
func requireConductor(t *testing.T) {
	t.Helper()
	if conductor == "" {
		t.Fatalf("acp-conductor is not available: %v", conductorBuildErr)
	}
}

// requireLibProxy fails t when the proxy-library passthrough did not build.
func requireLibProxy(t *testing.T) {
	t.Helper()
	if libProxy == "" {
		t.Fatalf("the proxy-library passthrough is not available: %v", libProxyBuildErr)
	}
}

// ---- component command lines ---------------------------------------------

// shellQuote quotes s as one shell word, as sh and the conductor read it.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if !strings.ContainsAny(s, " \t\n'\"\\$`&|;<>()*?[]#~{}!") {
		return s
	}
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return `"` + r.Replace(s) + `"`
}

func shellJoin(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// goProxyCmd is a component command line for the Go passthrough proxy.
func goProxyCmd(name string) string { return shellJoin(goProxy, name) }

// rustProxyCmd is a component command line for the Go passthrough proxy
// speaking the Rust SDK's dialect.
func rustProxyCmd(name string) string { return "ACP_IT_DIALECT=rust " + shellJoin(goProxy, name) }

// twProxyCmd is a component command line for the Thinkwell-dialect proxy
// that serves an MCP server over _mcp/*, as flavor ("thinkwell" or "sacp")
// reads them.
func twProxyCmd(name, flavor string) string {
	return "ACP_IT_TW_FLAVOR=" + flavor + " " + shellJoin(twProxy, name)
}

// libProxyCmd is a component command line for the passthrough built on the
// project's proxy library.
func libProxyCmd(name string) string { return shellJoin(libProxy, name) }

// pyProxyCmd is a component command line for the Python passthrough proxy.
func pyProxyCmd(name string) string {
	return shellJoin(python, "-u", filepath.Join(peersDir, "passthrough_proxy.py"), name)
}

// agentCmd is a component command line for the TypeScript SDK agent.
func agentCmd(name string, flags ...string) string {
	return shellJoin(append([]string{nodeBin, filepath.Join(peersDir, "agent.mjs"), "--name", name}, flags...)...)
}

// nestedCmd is a component command line for a conductor in proxy mode
// managing the given proxies.
func nestedCmd(proxies ...string) string {
	return shellJoin(append([]string{conductor, "proxy"}, proxies...)...)
}

// agentModeArgs is the argv of a conductor in agent mode.
func agentModeArgs(components ...string) []string {
	return append([]string{conductor, "agent"}, components...)
}

func newMarker() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
