package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/supervisor"
)

func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		// The two command lines supervisor.Run accepts.
		Use:   supervisor.Command + " " + supervisor.WatchFlag + " ID | " + supervisor.SweepFlag + " ID [MSG...]",
		Short: "Watch a chain so that its processes cannot outlive their conductor",
		Long: `Once the conductor that started this process is gone, kill every process
group it named and every process marked as one of chain ID's, so that,
should the conductor be killed outright (SIGKILL), nothing its components
started is left. With --watch it waits for the end of the pipe the conductor
passed as descriptor 3; --sweep, which the shell that waited runs at that
end, is given the pipe's lines as arguments instead. It is not meant to be
run by hand.`,
		Hidden:                true, // a part of the conductor, not a tool
		DisableFlagParsing:    true,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flags are not parsed, for Run's sake; --help is asked for still.
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				return cmd.Help()
			}
			status, ok := supervisor.Run(append([]string{supervisor.Command}, args...))
			if !ok {
				return fmt.Errorf("usage: %s", cmd.UseLine())
			}
			os.Exit(status)
			return nil
		},
	}
}
