package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/supervisor"
)

func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   supervisor.Command + " -- COMMAND [ARG...]",
		Short: "Run one component so that it cannot outlive its conductor",
		Long: `Run COMMAND as a component of the chain. The conductor starts each component
this way so that, should the conductor itself be killed outright (SIGKILL),
the component and everything it started are killed too. It is not meant to
be run by hand.`,
		Hidden:             true, // a part of the conductor, not a tool
		DisableFlagParsing: true, // every argument belongs to the component
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			os.Exit(supervisor.Run(args))
			return nil
		},
	}
}
