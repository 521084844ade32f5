package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/examples/proxies/context-injector/injector"
)

// newContextInjectorCmd runs the context-injector example proxy from this
// binary, with its own command line, so that the demo can put it in its
// chain with nothing installed.
func newContextInjectorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "context-injector [--file NAME]... [--max-bytes N]",
		Short: "Serve ACP on stdio as the context-injector example proxy",
		Long: "Serve ACP on stdin and stdout as the context-injector example proxy (examples/proxies/context-injector),\n" +
			"which puts the project's AGENTS.md in front of every prompt. The demo command runs it.",
		Hidden:             true, // a part of demo; install the example itself to use it
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
