package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/supervisor"
)

func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   supervisor.Command + " " + supervisor.ChainFlag,
		Short: "Run a chain's components so that they cannot outlive their conductor",
		Long: `Start and watch the components of one chain for the conductor that started
this process, over the control socket it passed as descriptor 3, so that,
should the conductor itself be killed outright (SIGKILL), every component
and everything it started are killed too. It is not meant to be run by hand.`,
		Hidden:             true, // a part of the conductor, not a tool
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Exit(supervisor.RunChain())
			return nil
		},
	}
}
