package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/internal/samples"
)

func newSampleAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sample-agent",
		Short:  "Serve ACP on stdio as the built-in scripted sample agent",
		Long:   "Serve ACP on stdin and stdout as the scripted sample agent the demo command runs.",
		Hidden: true, // a part of demo, not a tool
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveSample(cmd.Context(), samples.Agent)
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
