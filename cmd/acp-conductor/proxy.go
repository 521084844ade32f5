package main

import (
	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/conductor"
)

func newProxyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy [flags] [PROXY...]",
		Short: "Run a chain of proxies as one proxy inside another conductor",
		Long: `Run a chain of proxies that is itself a proxy, for nesting one chain inside
another. acp-conductor answers "proxy/initialize" from its parent conductor,
relays messages through its proxies in order, and sends what the last proxy
addresses to its successor back up to the parent, which delivers it onward.

Every argument is a proxy, written as for "acp-conductor agent"; none at all
makes a pass-through. A chain file given with --config must not have an
agent section.`,
		Example: `  # Two proxies, packaged as one proxy of an outer chain (note the inner quotes):
  acp-conductor agent "acp-conductor proxy 'ctx-proxy --flag x' filter-proxy" "my-agent --acp"

  # The same inner chain from a file:
  acp-conductor proxy --config inner.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runChain(cmd, conductor.ProxyMode, args)
		},
	}
	addChainFlags(cmd)
	refuseOnFlagError(cmd)
	return cmd
}
