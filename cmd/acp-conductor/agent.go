package main

import (
	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/conductor"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent [flags] [PROXY...] AGENT",
		Short: "Serve an editor: run proxies and a final agent as one agent",
		Long: `Run a chain for an editor. acp-conductor answers "initialize" on stdin and
stdout as if it were the agent, starts each proxy and the agent, and relays
every message through the chain.

Each argument is one component: a program and its arguments in a single
string, split like a POSIX shell would split it but never run by one, so $VAR
and globs are not expanded, and an unquoted pipe, redirection, parenthesis,
backquote or comment is an error: quote it. Leading NAME=value words
set the component's environment. The last argument is the agent; those before
it are the proxies, nearest the editor first.

Instead of arguments, --config names a YAML chain file (see "acp-conductor
validate --help"). Giving both is an error.

The conductor stops when the editor closes stdin, on SIGINT, SIGTERM or
SIGHUP, or when a component fails. Within --shutdown-grace, requests in flight
finish and every component's stdin is closed; what is still running then gets
SIGTERM, and SIGKILL half a second later. A second signal skips the wait,
and so do a signal and the editor closing stdin, in either order. A chain
that cannot start answers the editor's first request with the reason; when
stdin is a terminal, it prints the reason and exits at once. It exits 0
after a clean stop and 1 otherwise, with the reason logged.`,
		Example: `  # One proxy, then the agent:
  acp-conductor agent "ctx-proxy --flag x" "npx -y some-agent --acp"

  # Environment for a component, and an argument with a space:
  acp-conductor agent "API_KEY=abc ctx-proxy --note 'be brief'" "my-agent --acp"

  # Just the agent, with debug logs in a file:
  acp-conductor agent --log-level debug --log-file /tmp/acp.log "my-agent --acp"

  # A chain from a file:
  acp-conductor agent --config ~/.config/acp/chain.yaml

  # Record every message, then see the chain as a sequence diagram:
  acp-conductor agent --trace /tmp/chain.jsons --config chain.yaml
  acp-conductor trace view /tmp/chain.jsons

  # Watch the chain live in a browser (the URL is logged at start-up):
  acp-conductor agent --trace-serve 127.0.0.1:0 --config chain.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runChain(cmd, conductor.AgentMode, args)
		},
	}
	addChainFlags(cmd)
	refuseOnFlagError(cmd)
	return cmd
}
