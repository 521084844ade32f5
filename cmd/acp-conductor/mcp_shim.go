package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
)

func newMCPShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:   mcpbridge.ShimCommand,
		Short: "Relay an agent's stdio MCP connection to the conductor that declared the server",
		Long: `Relay MCP on stdin and stdout to the acp-conductor that declared this server
to the agent, for agents without MCP-over-ACP. The agent runs it from the
declaration, which sets ` + mcpbridge.EnvSocket + ` and ` + mcpbridge.EnvToken + `;
it is not meant to be run by hand. Exits 0 when the conductor ends the
connection.`,
		Hidden: true, // a part of the conductor, not a tool
		Args:   wantArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCPShim(cmd.Context())
		},
	}
}

func runMCPShim(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// An agent that stops reading makes writes fail with EPIPE, reported as
	// an error, rather than kill the shim with SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// Non-blocking, so the shim can stop reading when the conductor ends
	// the connection; a blocking stdin only delays exit until the agent
	// closes it.
	stdin := conductor.Stdin()
	err := mcpbridge.RunShim(ctx, stdin, os.Stdout, os.Getenv(mcpbridge.EnvSocket), os.Getenv(mcpbridge.EnvToken))
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // the agent stopped the server
	}
	return err
}
