package main

import (
	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/internal/samples"
)

func newSampleProxyCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sample-proxy",
		Short:  "Serve ACP on stdio as the built-in sample proxy",
		Long:   "Serve ACP on stdin and stdout as the sample proxy the demo command runs: it puts a note at the start of every prompt.",
		Hidden: true, // a part of demo, not a tool
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveSample(cmd.Context(), samples.Proxy)
		},
	}
}
