package mcp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The programs the tests run, built by TestMain into a temporary directory.
var (
	conductor string // acp-conductor, from the root module (ACP_IT_CONDUCTOR overrides)
	goProxy   string // integration/testdata/goproxy, from the root module: a passthrough proxy
	twProxy   string // integration/testdata/twproxy, from the root module: a Thinkwell-dialect MCP owner
	toolProxy string // testdata/toolproxy: the proxy that owns the MCP server
	sdkAgent  string // testdata/sdkagent: the agent whose MCP client is the SDK's
	mcpTools  string // examples/proxies/mcp-tools, a module of its own
)

func TestMain(m *testing.M) {
	// Race-built binaries sleep a second on exit to flush reports; with a
	// watchdog per chain that doubles, and eats the shutdown grace.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "acp-mcp-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root := filepath.Join("..", "..")
	conductor = filepath.Join(dir, "acp-conductor")
	goProxy = filepath.Join(dir, "goproxy")
	twProxy = filepath.Join(dir, "twproxy")
	toolProxy = filepath.Join(dir, "toolproxy")
	sdkAgent = filepath.Join(dir, "sdkagent")
	mcpTools = filepath.Join(dir, "mcp-tools")
	builds := []struct{ dir, out, pkg string }{
		{root, conductor, "./cmd/acp-conductor"},
		{root, goProxy, "./integration/testdata/goproxy"},
		{root, twProxy, "./integration/testdata/twproxy"},
		{".", toolProxy, "./testdata/toolproxy"},
		{".", sdkAgent, "./testdata/sdkagent"},
		{filepath.Join(root, "examples", "proxies", "mcp-tools"), mcpTools, "."},
	}
	if pre := os.Getenv("ACP_IT_CONDUCTOR"); pre != "" {
		// A prebuilt conductor (an installed one, say) instead of ./cmd.
		if conductor, err = exec.LookPath(pre); err == nil {
			conductor, err = filepath.Abs(conductor)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "ACP_IT_CONDUCTOR: %v\n", err)
			return 1
		}
		builds = builds[1:]
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() { errs[i] = goBuild(b.dir, b.out, b.pkg) })
	}
	wg.Wait()
	failed := false
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
		}
	}
	if failed {
		return 1
	}
	return m.Run()
}

// goBuild builds pkg in dir (a module's root) to out, with the race
// detector when the tests have it, so that a race in any of the programs
// fails its run too (exit status 66).
func goBuild(dir, out, pkg string) error {
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, pkg)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (in %s): %v\n%s", pkg, dir, err, b)
	}
	return nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
