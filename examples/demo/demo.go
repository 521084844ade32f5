package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/acp-conductor/acp-conductor/examples/demo/internal/samples"
	permissionpolicy "github.com/acp-conductor/acp-conductor/examples/proxies/permission-policy"
)

type demoOptions struct {
	conductor string // the acp-conductor binary
	timeout   time.Duration
	verbose   bool
	prompt    string
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--conductor PATH]",
		Short: "Run a complete acp-conductor chain and show the conversation",
		Long: `Run a complete chain with nothing to set up, and print the conversation.

The demo makes a temporary project directory holding an AGENTS.md and a
README.md, writes a chain file next to it, and starts acp-conductor on it
(acp-conductor agent --config chain.yaml): the binary given with --conductor,
by default the acp-conductor beside this program or else in PATH. The chain is

  context-injector   the example proxy of examples/proxies/context-injector,
                     built into the demo: it puts the project's AGENTS.md
                     in front of every prompt
  permission-policy  the example proxy of examples/proxies/permission-policy,
                     a Python script carried in this binary and run with
                     python3, with a rule file that allows reads: it answers
                     the agent's permission request without asking the client
  sample-proxy       puts a note in front of every prompt, and offers the agent
                     an MCP tool over the ACP connection (MCP-over-ACP)
  sample-agent       a scripted agent

If python3 (3.8 or newer) is not there to run it, the demo says so, leaves
permission-policy out, and the client answers the permission request itself.

The demo then talks to the chain as an editor would: initialize, session/new
in the project directory, then one prompt. The agent streams back the prompt
it received, instructions and note included, asks permission to read
README.md, reads it through the client with fs/read_text_file, calls the
sample proxy's tool, and ends its turn. The client serves the file from
memory.

Lines marked → go from the client into the chain; lines marked ← come back.
The demo exits 0 if every step happened and 1 otherwise, and gives up after
--timeout. The conductor's own logs are hidden unless --verbose is given, or
shown on stderr if the demo fails.`,
		Example: `  make demo      # builds acp-conductor and this demo, and runs it
  demo --conductor ./acp-conductor --verbose
  demo --prompt "Summarize the README" --timeout 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Piped into head, say, the demo would die of SIGPIPE and leave
			// its temporary directory behind; with SIGPIPE noticed, writes
			// to the closed pipe fail instead, and the demo cleans up.
			sigpipe := make(chan os.Signal, 1)
			signal.Notify(sigpipe, syscall.SIGPIPE)
			defer signal.Stop(sigpipe)
			if o.conductor == "" {
				var err error
				if o.conductor, err = findConductor(); err != nil {
					return err
				}
			}
			return runDemo(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	cmd.Flags().StringVar(&o.conductor, "conductor", "", "the acp-conductor binary to run (default: beside this program, or in PATH)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "give up if the demo has not finished after this long")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "show the conductor's debug logs on stderr")
	cmd.Flags().StringVar(&o.prompt, "prompt", "What is this project about?", "the prompt to send")
	return cmd
}

// The demo's project directory, the session's working directory: its
// AGENTS.md is what context-injector injects, and its README.md what the
// agent reads (through the client, which serves it from memory).
const (
	demoAgentsMD = "# Instructions for agents\n\n" +
		"- Read README.md before you answer.\n" +
		"- Keep your answer to one paragraph.\n"
	demoReadme = "# Demo project\n\n" +
		"A project made up by the acp-conductor demo. The agent reads this file through the client with fs/read_text_file.\n"
)

// The permission-policy example proxy's rule file in the demo: the agent's
// read of README.md is allowed without asking the client.
const (
	demoRule        = `{"kind": "read", "choose": "allow_once"}`
	demoRules       = `{"rules": [` + demoRule + `]}` + "\n"
	demoPolicyAllow = "allow-once" // the sample agent's option of kind allow_once
)

// A demoChain is the chain the demo runs, as it is described to the reader
// and as the chain file it writes for the conductor.
type demoChain struct {
	project   string // the session's working directory
	agentsMD  string // the path of its AGENTS.md
	file      string // the chain file
	proxies   []demoComponent
	agent     demoComponent
	skipped   []string // why an example proxy was left out, one line each
	policyLog *logLines
}

// A demoComponent is one program of the demo's chain.
type demoComponent struct {
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"`
	Args    []string `yaml:"args,omitempty"`

	about string // what it does, for the reader
}

// has reports whether the chain runs the named proxy.
func (c *demoChain) has(name string) bool {
	for _, p := range c.proxies {
		if p.Name == name {
			return true
		}
	}
	return false
}

// newDemoChain makes the project directory in dir and the chain around it,
// leaving out the examples whose interpreter this machine lacks.
func newDemoChain(ctx context.Context, self, dir string) (*demoChain, error) {
	c := &demoChain{
		project:   filepath.Join(dir, "project"),
		file:      filepath.Join(dir, "chain.yaml"),
		policyLog: &logLines{prefix: "permission-policy: "},
	}
	c.agentsMD = filepath.Join(c.project, "AGENTS.md")
	files := map[string]string{
		c.agentsMD:                            demoAgentsMD,
		filepath.Join(c.project, "README.md"): demoReadme,
	}
	if err := os.Mkdir(c.project, 0o755); err != nil {
		return nil, err
	}

	c.proxies = append(c.proxies, demoComponent{
		Name: "context-injector", Command: self, Args: []string{"context-injector", "--file", "AGENTS.md"},
		about: "example proxy (Go, built in): puts the project's AGENTS.md in front of each prompt",
	})
	if python, err := findPython(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		c.skipped = append(c.skipped, fmt.Sprintf("Skipped permission-policy (examples/proxies/permission-policy): %v; "+
			"the client answers the permission request itself.", err))
	} else {
		script, rules := filepath.Join(dir, "permission_policy.py"), filepath.Join(dir, "permission-rules.json")
		files[script], files[rules] = string(permissionpolicy.Script), demoRules
		c.proxies = append(c.proxies, demoComponent{
			Name: "permission-policy", Command: python, Args: []string{script, "--rules", rules},
			about: "example proxy (Python, run by python3): answers permission requests by rule;\n" +
				"its rule file here: " + demoRules,
		})
	}
	c.proxies = append(c.proxies, demoComponent{
		Name: "sample-proxy", Command: self, Args: []string{"sample-proxy"},
		about: "puts a note in front of each prompt; offers the agent an MCP tool, " + samples.ProxyMCPTool,
	})
	c.agent = demoComponent{
		Name: "sample-agent", Command: self, Args: []string{"sample-agent"},
		about: "scripted: echoes its prompt, reads README.md through the client, calls " + samples.ProxyMCPTool,
	}

	chainFile, err := yaml.Marshal(struct {
		Name    string          `yaml:"name"`
		Proxies []demoComponent `yaml:"proxies"`
		Agent   demoComponent   `yaml:"agent"`
	}{"demo", c.proxies, c.agent})
	if err != nil {
		return nil, err
	}
	files[c.file] = string(chainFile)
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// describe writes the chain for the reader: first line the chain itself,
// then what each part does.
func (c *demoChain) describe(w io.Writer) {
	for _, s := range c.skipped {
		fmt.Fprintln(w, s)
	}
	names := []string{"client", "acp-conductor"}
	for _, p := range c.proxies {
		names = append(names, p.Name)
	}
	fmt.Fprintf(w, "Chain: %s\n", strings.Join(append(names, c.agent.Name), " → "))
	for _, p := range append(c.proxies, c.agent) {
		about := strings.ReplaceAll(strings.TrimSpace(p.about), "\n", "\n"+strings.Repeat(" ", 2+17+2))
		fmt.Fprintf(w, "  %-17s  %s\n", p.Name, about)
	}
	fmt.Fprintf(w, "Project (the session's cwd): %s, with AGENTS.md and README.md\n", c.project)
	fmt.Fprintf(w, "(→ from the client into the chain, ← back from the chain)\n\n")
}

// findPython returns the python3 to run the permission-policy example with,
// or why there is none fit to run it.
func findPython(ctx context.Context) (string, error) {
	path, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("python3 is not installed (not found in PATH)")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		why := err.Error()
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(bytes.TrimSpace(exit.Stderr)) > 0 {
			why, _, _ = strings.Cut(string(bytes.TrimSpace(exit.Stderr)), "\n")
		}
		return "", fmt.Errorf("python3 (%s) does not run: %s", path, why)
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(out), "%d.%d", &major, &minor); err != nil {
		return "", fmt.Errorf("python3 (%s) does not say its version", path)
	}
	if major < 3 || major == 3 && minor < 8 {
		return "", fmt.Errorf("python3 (%s) is version %d.%d, and permission-policy needs 3.8 or newer", path, major, minor)
	}
	return path, nil
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, o demoOptions) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find this program to run its components: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the demo did not finish within --timeout %v", o.timeout))
	defer cancel()

	dir, err := os.MkdirTemp("", "acp-conductor-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	chain, err := newDemoChain(ctx, self, dir)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("demo failed:\n  %s", stopCause(ctx))
		}
		return fmt.Errorf("demo: setting up the project directory: %w", err)
	}

	// Component stderr is logged at level info: that is where
	// permission-policy reports its decisions.
	level := "info"
	if o.verbose {
		level = "debug"
	}
	conductorCmd := exec.Command(o.conductor, "agent", "--config", chain.file, "--log-level", level, "--log-format", "console")
	logs := &tailBuffer{max: 64 << 10}
	conductorCmd.Stderr = io.MultiWriter(logs, chain.policyLog)
	if o.verbose {
		conductorCmd.Stderr = io.MultiWriter(stderr, chain.policyLog)
	}
	// Its own process group, so that a stuck conductor and everything it
	// started can be stopped together.
	conductorCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	conductorCmd.WaitDelay = 2 * time.Second
	toChain, err := conductorCmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fromChain, err := conductorCmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := conductorCmd.Start(); err != nil {
		return fmt.Errorf("demo: starting the conductor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- conductorCmd.Wait() }()

	chain.describe(stdout)
	client := &samples.Client{
		Prompt:     o.prompt,
		Cwd:        chain.project,
		Files:      map[string]string{filepath.Join(chain.project, "README.md"): demoReadme},
		Transcript: stdout,
	}
	res, runErr := client.Run(ctx, fromChain, toChain) // closes toChain, which ends the chain
	exitErr := awaitExit(ctx, conductorCmd, exited)

	var failures []string
	switch {
	case ctx.Err() != nil:
		// Stopping the conductor was then our doing; its exit says nothing.
		failures = append(failures, stopCause(ctx))
	case runErr != nil:
		failures = append(failures, runErr.Error())
	default:
		failures = append(failures, checkDemo(res, o.prompt, chain)...)
	}
	if exitErr != nil && ctx.Err() == nil {
		failures = append(failures, "the conductor "+exitErr.Error())
	}
	if len(failures) > 0 {
		if !o.verbose && logs.Len() > 0 {
			fmt.Fprintf(stderr, "conductor log:\n%s\n", logs)
		}
		return fmt.Errorf("demo failed:\n  %s", strings.Join(failures, "\n  "))
	}

	if said := chain.policyLog.get(); len(said) > 0 {
		fmt.Fprintf(stdout, "\npermission-policy's log (its stderr, which the conductor logs):\n")
		for _, line := range said {
			fmt.Fprintf(stdout, "  %s\n", line)
		}
	}
	fmt.Fprintf(stdout, "\nDemo finished:\n")
	fmt.Fprintf(stdout, "- context-injector put the project's AGENTS.md in front of the prompt, then sample-proxy,\n"+
		"  nearer the agent, put its note in front of that: the agent's echo shows both.\n")
	if chain.has("permission-policy") {
		fmt.Fprintf(stdout, "- permission-policy answered the agent's permission request itself, with %s\n"+
			"  by its rule for reads: the client was never asked.\n", demoPolicyAllow)
	} else {
		fmt.Fprintf(stdout, "- The client granted %d permission request(s) (permission-policy was skipped).\n", len(res.Permissions))
	}
	fmt.Fprintf(stdout, "- The client served %d file read(s); the agent called sample-proxy's %s tool over MCP-over-ACP.\n"+
		"- The agent streamed %d characters back, the turn ended with %s, and the conductor exited cleanly.\n",
		len(res.Reads), samples.ProxyMCPTool, len(res.Reply), res.StopReason)
	return nil
}

// findConductor returns the acp-conductor beside this program, as make demo
// builds it, or else the one in PATH.
func findConductor() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "acp-conductor")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	path, err := exec.LookPath("acp-conductor")
	if err != nil {
		return "", errors.New("acp-conductor is neither beside this program nor in PATH: install it, give --conductor, or run make demo")
	}
	return path, nil
}

// stopCause says why the demo's ctx ended: its --timeout, or an interrupt.
func stopCause(ctx context.Context) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		return "interrupted"
	}
	return cause.Error()
}

// checkDemo lists whatever the scripted conversation should have shown and
// did not.
func checkDemo(res *samples.Result, prompt string, chain *demoChain) []string {
	var missing []string
	if !strings.Contains(res.Reply, "> Project instructions from "+chain.agentsMD+":") ||
		!strings.Contains(res.Reply, "> "+strings.SplitN(demoAgentsMD, "\n", 2)[0]) {
		missing = append(missing, "the agent did not receive the project's AGENTS.md: did the prompt pass through context-injector?")
	}
	if !strings.Contains(res.Reply, "> "+samples.ProxyNote) {
		missing = append(missing, "the agent did not receive the sample proxy's note: did the prompt pass through sample-proxy?")
	}
	if !strings.Contains(res.Reply, "> "+strings.SplitN(prompt, "\n", 2)[0]) {
		missing = append(missing, "the agent did not echo the prompt")
	}
	granted := strings.Contains(res.Reply, "Permission granted (")
	switch {
	case chain.has("permission-policy"):
		if len(res.Permissions) > 0 {
			missing = append(missing, "the client was asked for permission: permission-policy did not answer the request by its rule")
		} else if !strings.Contains(res.Reply, "Permission granted ("+demoPolicyAllow+")") {
			missing = append(missing, "the agent's permission request was not granted "+demoPolicyAllow+" by permission-policy")
		}
	case len(res.Permissions) == 0:
		missing = append(missing, "the agent never asked for permission")
	case !granted:
		missing = append(missing, "the agent did not say its permission request was granted")
	}
	if len(res.Reads) == 0 {
		missing = append(missing, "the agent never read a file through the client")
	}
	if !strings.Contains(res.Reply, "I also called "+samples.ProxyMCPTool) {
		missing = append(missing, "the agent did not call sample-proxy's MCP tool over MCP-over-ACP")
	}
	if res.StopReason != "end_turn" {
		missing = append(missing, fmt.Sprintf("the turn ended with %q, not end_turn", res.StopReason))
	}
	return missing
}

// logLines picks out of the conductor's console log the messages that start
// with prefix: the conductor logs each line a component writes on its stderr
// as a message of its own, and permission-policy starts each of its lines
// with its name.
type logLines struct {
	prefix string

	mu      sync.Mutex
	partial []byte // the line being written
	lines   []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		// A console log line is time, level, logger, message and fields,
		// separated by tabs.
		if _, msg, ok := strings.Cut(string(l.partial[:i]), "\t"+l.prefix); ok {
			msg, _, _ = strings.Cut(msg, "\t")
			l.lines = append(l.lines, l.prefix+msg)
		}
		l.partial = l.partial[:copy(l.partial, l.partial[i+1:])]
	}
	if len(l.partial) > 64<<10 {
		l.partial = l.partial[:0] // no line of interest is that long
	}
	return len(p), nil
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// awaitExit waits for the conductor, whose stdin is closed, to exit on its
// own; failing that, or once ctx is done, it signals the conductor's process
// group with SIGTERM and then SIGKILL, so the demo never hangs. It returns
// why the conductor did not exit cleanly, or nil.
func awaitExit(ctx context.Context, cmd *exec.Cmd, exited <-chan error) error {
	const grace = 5 * time.Second
	describe := func(err error) error {
		if err != nil {
			return fmt.Errorf("exited with %v", err)
		}
		return nil
	}
	select {
	case err := <-exited:
		return describe(err)
	case <-ctx.Done():
	case <-time.After(grace):
	}
	pgid := -cmd.Process.Pid
	syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case err := <-exited:
		if err := describe(err); err != nil {
			return err
		}
		return errors.New("did not exit when its input closed, and had to be stopped with SIGTERM")
	case <-time.After(grace):
	}
	syscall.Kill(pgid, syscall.SIGKILL)
	<-exited
	return errors.New("did not exit when its input closed, nor on SIGTERM, and had to be killed")
}

// A tailBuffer keeps the last max bytes written to it: enough of the
// conductor's log to explain a failure, however long the log grows.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.buf)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimRight(string(t.buf), "\n")
}
