package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/internal/samples"
)

type demoOptions struct {
	timeout time.Duration
	verbose bool
	prompt  string
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a complete sample chain and show the conversation",
		Long: `Run a complete chain with nothing to set up, and print the conversation.

The demo starts this same binary as a conductor,

  acp-conductor agent "acp-conductor sample-proxy" "acp-conductor sample-agent"

and talks to it as an editor would: initialize, session/new, then one prompt.
The sample proxy puts a note in front of the prompt; the sample agent streams
back the prompt it received, note included, asks permission to read a file,
reads it through the client with fs/read_text_file, and ends its turn. The
client grants the permission and serves the file from memory.

Lines marked → go from the client into the chain; lines marked ← come back.
The demo exits 0 if every step happened and 1 otherwise, and gives up after
--timeout. The conductor's own logs are hidden unless --verbose is given, or
shown on stderr if the demo fails.`,
		Example: `  acp-conductor demo
  acp-conductor demo --verbose
  acp-conductor demo --prompt "Summarize the README" --timeout 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 30*time.Second, "give up if the demo has not finished after this long")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "show the conductor's debug logs on stderr")
	cmd.Flags().StringVar(&o.prompt, "prompt", "What is this project about?", "the prompt to send")
	return cmd
}

// The demo client's workspace, which exists only in its memory.
const (
	demoCwd    = "/demo/project"
	demoReadme = "# Demo project\n\nThis README lives in the demo client's memory; the agent reads it with fs/read_text_file.\n"
)

func runDemo(ctx context.Context, stdout, stderr io.Writer, o demoOptions) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find this program to run it as the chain: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the demo did not finish within --timeout %v", o.timeout))
	defer cancel()

	level := "error"
	if o.verbose {
		level = "debug"
	}
	conductorCmd := exec.Command(self, "agent", "--name", "demo", "--log-level", level, "--log-format", "console",
		shellQuote(self)+" sample-proxy",
		shellQuote(self)+" sample-agent")
	logs := &tailBuffer{max: 64 << 10}
	conductorCmd.Stderr = logs
	if o.verbose {
		conductorCmd.Stderr = stderr
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

	fmt.Fprintf(stdout, "Chain: client → acp-conductor → sample-proxy → sample-agent\n")
	fmt.Fprintf(stdout, "(→ from the client into the chain, ← back from the chain)\n\n")
	client := &samples.Client{
		Prompt:     o.prompt,
		Cwd:        demoCwd,
		Files:      map[string]string{demoCwd + "/README.md": demoReadme},
		Transcript: stdout,
	}
	res, runErr := client.Run(ctx, fromChain, toChain) // closes toChain, which ends the chain
	exitErr := awaitExit(ctx, conductorCmd, exited)

	var failures []string
	switch {
	case ctx.Err() != nil:
		// Stopping the conductor was then our doing; its exit says nothing.
		cause := context.Cause(ctx)
		if errors.Is(cause, context.Canceled) {
			cause = errors.New("interrupted")
		}
		failures = append(failures, cause.Error())
	case runErr != nil:
		failures = append(failures, runErr.Error())
	default:
		failures = append(failures, checkDemo(res, o.prompt)...)
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
	fmt.Fprintf(stdout, "\nDemo finished: the prompt went through sample-proxy, which added its note;\n"+
		"the agent streamed %d characters back, the client granted %d permission request(s)\n"+
		"and served %d file read(s), the agent called sample-proxy's %s tool over MCP-over-ACP,\n"+
		"the turn ended with %s, and the conductor exited cleanly.\n",
		len(res.Reply), len(res.Permissions), len(res.Reads), samples.ProxyMCPTool, res.StopReason)
	return nil
}

// checkDemo lists whatever the scripted conversation should have shown and
// did not.
func checkDemo(res *samples.Result, prompt string) []string {
	var missing []string
	if !strings.Contains(res.Reply, "> "+samples.ProxyNote) {
		missing = append(missing, "the agent did not receive the sample proxy's note: did the prompt pass through sample-proxy?")
	}
	if !strings.Contains(res.Reply, "> "+strings.SplitN(prompt, "\n", 2)[0]) {
		missing = append(missing, "the agent did not echo the prompt")
	}
	if len(res.Permissions) == 0 {
		missing = append(missing, "the agent never asked for permission")
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

// shellQuote quotes s as one word for a command-line component.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
