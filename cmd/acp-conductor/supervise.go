package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/supervisor"
)

func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   supervisor.Command + " " + supervisor.WatchFlag + " ID",
		Short: "Watch a chain so that its processes cannot outlive their conductor",
		Long: `Wait for the end of the pipe the conductor that started this process passed
as descriptor 3, and then kill every process group the conductor named on it
and every process marked as one of chain ID's, so that, should the conductor
itself be killed outright (SIGKILL), nothing its components started is left.
It is not meant to be run by hand.`,
		Hidden:             true, // a part of the conductor, not a tool
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			status, ok := supervisor.Run(append([]string{supervisor.Command}, args...))
			if !ok {
				return fmt.Errorf("usage: %s %s ID", supervisor.Command, supervisor.WatchFlag)
			}
			os.Exit(status)
			return nil
		},
	}
}
