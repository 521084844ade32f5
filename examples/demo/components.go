package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/examples/demo/internal/samples"
	"github.com/acp-conductor/acp-conductor/examples/proxies/context-injector/injector"
)

// The demo's chain file names this program for every Go component, with one
// of these hidden commands: the chain then runs with nothing installed but
// acp-conductor itself.

func newSampleAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sample-agent",
		Short:  "Serve ACP on stdio as the scripted sample agent",
		Long:   "Serve ACP on stdin and stdout as the scripted sample agent the demo runs.",
		Hidden: true, // a part of the demo, not a tool
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveSample(cmd.Context(), samples.Agent)
		},
	}
}

func newSampleProxyCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sample-proxy",
		Short:  "Serve ACP on stdio as the sample proxy",
		Long:   "Serve ACP on stdin and stdout as the sample proxy the demo runs: it puts a note at the start of every prompt.",
		Hidden: true, // a part of the demo, not a tool
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveSample(cmd.Context(), samples.Proxy)
		},
	}
}

// newContextInjectorCmd runs the context-injector example proxy from this
// binary, with its own command line.
func newContextInjectorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "context-injector [--file NAME]... [--max-bytes N]",
		Short: "Serve ACP on stdio as the context-injector example proxy",
		Long: "Serve ACP on stdin and stdout as the context-injector example proxy (examples/proxies/context-injector),\n" +
			"which puts the project's AGENTS.md in front of every prompt. The demo runs it.",
		Hidden:             true, // a part of the demo; install the example itself to use it
		DisableFlagParsing: true, // its flags are the example's own
		RunE: func(cmd *cobra.Command, args []string) error {
			err := serveSample(cmd.Context(), func(ctx context.Context, in io.Reader, out io.WriteCloser) error {
				return injector.Run(ctx, args, in, out, os.Stderr)
			})
			switch {
			case errors.Is(err, flag.ErrHelp):
				return nil
			case errors.Is(err, injector.ErrUsage):
				return reportedError{err} // it has said what is wrong
			}
			return err
		},
	}
}

// serveSample runs a sample component on stdin and stdout until its input
// ends or it is asked to stop, which are both clean ends.
func serveSample(ctx context.Context, serve func(context.Context, io.Reader, io.WriteCloser) error) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := serve(ctx, os.Stdin, os.Stdout)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
