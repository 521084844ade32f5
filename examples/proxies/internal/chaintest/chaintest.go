// Package chaintest runs the example proxies inside real chains, for their
// tests. A chain is the acp-conductor binary, built from this module, with the
// example proxies in front of the agent of integration/peers, which is built
// on the official ACP TypeScript SDK; the editor is either the SDK client of
// integration/peers (client.mjs) or this package's editor.mjs, an SDK client
// that reports what the agent's updates said.
//
// Everything is set up once per test binary, on first use, and removed by
// [Main]. A missing node or python3 fails the test rather than skipping it:
// without the real peers these tests say nothing.
package chaintest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// An Env is what the chains of one test binary are made of.
type Env struct {
	Root      string // the module's root directory
	Conductor string // the built acp-conductor
	Node      string
	Peers     string // integration/peers, or a private copy, with the SDK installed

	bin    string // where built binaries go
	builds sync.Map
}

var (
	once     sync.Once
	env      *Env
	setupErr error
	tmpDir   string
)

// Main runs the tests of one package and removes what they built.
func Main(m *testing.M) int {
	code := m.Run()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
	return code
}

// Setup returns the environment, making it on first use, and fails t if it
// cannot be made.
func Setup(t testing.TB) *Env {
	t.Helper()
	once.Do(func() { env, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("chaintest: %v", setupErr)
	}
	return env
}

func setup() (*Env, error) {
	e := new(Env)
	var err error
	if e.Node, err = exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("node (>= 20) is required to run the example proxies in a chain: %w", err)
	}
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return nil, fmt.Errorf("finding the module root: %v", err)
	}
	e.Root = filepath.Dir(string(bytes.TrimSpace(out)))
	if tmpDir, err = os.MkdirTemp("", "acp-examples-"); err != nil {
		return nil, err
	}
	e.bin = tmpDir
	if pre := os.Getenv("ACP_IT_CONDUCTOR"); pre != "" {
		// A prebuilt conductor, as for the integration tests.
		if e.Conductor, err = exec.LookPath(pre); err != nil {
			return nil, fmt.Errorf("ACP_IT_CONDUCTOR: %w", err)
		}
		if e.Conductor, err = filepath.Abs(e.Conductor); err != nil {
			return nil, fmt.Errorf("ACP_IT_CONDUCTOR: %w", err)
		}
	} else if e.Conductor, err = e.build("./cmd/acp-conductor"); err != nil {
		return nil, err
	}
	if e.Peers, err = peers(e.Root, tmpDir); err != nil {
		return nil, err
	}
	return e, nil
}

// Build builds the main package pkg (relative to the module root) and
// returns the binary, built once per test binary. It has the race detector
// when the test does, so a race in it fails the chain too.
func (e *Env) Build(t testing.TB, pkg string) string {
	t.Helper()
	bin, err := e.build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func (e *Env) build(pkg string) (string, error) {
	type result struct {
		once sync.Once
		bin  string
		err  error
	}
	v, _ := e.builds.LoadOrStore(pkg, new(result))
	r := v.(*result)
	r.once.Do(func() {
		r.bin = filepath.Join(e.bin, filepath.Base(pkg))
		args := []string{"build", "-o", r.bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool(), append(args, pkg)...)
		cmd.Dir = e.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("chaintest: building %s: %v\n%s", pkg, err, out)
		}
	})
	return r.bin, r.err
}

// Python returns the python3 on PATH, and fails t if there is none.
func Python(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required to run this proxy: %v", err)
	}
	return p
}

// AgentCmd is the component command line of the SDK agent.
func (e *Env) AgentCmd(name string) string {
	return Quote(e.Node, filepath.Join(e.Peers, "agent.mjs"), "--name", name)
}

// AgentMode returns the argv of a conductor running the given components,
// the last of them the agent.
func (e *Env) AgentMode(components ...string) []string {
	return append([]string{e.Conductor, "agent"}, components...)
}

// Quote makes one component command line of words, quoted as the conductor
// splits it (like a POSIX shell, with no expansion).
func Quote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`&|;<>()*?[]#~{}!") {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// Context returns a context that ends a little before the test's deadline,
// or after two minutes, so that a stuck chain fails with its output logged
// rather than killing the test binary.
func Context(t testing.TB) context.Context {
	d := time.Now().Add(2 * time.Minute)
	if td, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := td.Deadline(); ok && dl.Add(-10*time.Second).Before(d) {
			d = dl.Add(-10 * time.Second)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runNode runs a node script to completion and returns its last line of
// stdout, which the drivers use for their report. Its stderr, which carries
// the conductor's and the components' too, is logged if t fails.
func (e *Env) runNode(t testing.TB, ctx context.Context, args ...string) (last []byte, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, e.Node, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A component that outlived the chain could hold the stderr pipe open;
	// do not wait on it for ever.
	cmd.WaitDelay = 10 * time.Second
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of the editor, conductor and components:\n%s", stderr.String())
		}
	})
	err = cmd.Run()
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	return lines[len(lines)-1], err
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// peers returns a directory holding integration/peers' scripts with the SDK
// installed. That is integration/peers itself when its install is complete
// and current. Otherwise the integration tests, which may be running at the
// same moment, will reinstall it, so rather than race them this installs a
// private copy under tmp.
func peers(root, tmp string) (string, error) {
	dir := filepath.Join(root, "integration", "peers")
	if installed(dir) {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is required to install the ACP SDK for the test peers: %w", err)
	}
	priv := filepath.Join(tmp, "peers")
	if err := os.Mkdir(priv, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"package.json", "package-lock.json", "client.mjs", "agent.mjs"} {
		if err := copyFile(filepath.Join(priv, name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("copying the test peers: %w", err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = priv
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci for the test peers: %v\n%s", err, out)
	}
	return priv, nil
}

// installed reports whether npm finished installing dir's package-lock.json:
// npm writes node_modules/.package-lock.json last.
func installed(dir string) bool {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false
	}
	done, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil || done.ModTime().Before(lock.ModTime()) {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json"))
	return err == nil
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
