package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
)

func newValidateCmd() *cobra.Command {
	var file, mode string
	var noCommands bool
	cmd := &cobra.Command{
		Use:   "validate --config FILE [--mode agent|proxy]",
		Short: "Check a chain file and report its problems with their lines",
		Long: `Check a YAML chain file without running anything. Problems are reported
together, each with its line: unknown keys, values of the wrong type, tab
indentation, missing commands, programs not found in PATH (skip with
--no-commands), a command and its arguments written as one string, ~ (which
nothing expands), duplicate names, invalid settings and on_failure
policies, an agent missing in agent mode or present in proxy mode.
ACP_CONDUCTOR_* environment variables are applied and checked too, as
"agent" and "proxy" would, and one that names no setting is an error.
Every problem found is reported in one pass, for every component, each
naming its component or key; only a file that is not YAML at all hides
the problems of its keys. A relative cwd is a warning: it depends on
where the editor starts the conductor.
Prints a one-line summary and exits 0 if the file is good, and exits 1
otherwise.

Every key a chain file may hold is below; only the agent's command (or url)
is required, and in proxy mode there is no agent. The values shown are the
defaults, except for the chain's name and components. README.md's "Chain
file reference" and "Remote chains" say more.

  name: my-chain              # shown in logs
  proxies:                    # nearest the editor first; may be empty
    - name: context           # default: what it runs (b for npx -y @a/b)
      command: ctx-proxy      # required; found in PATH unless it has a slash
      args: ["--flag", "x"]
      env: {API_KEY: abc}     # added to the conductor's environment
      cwd: /some/dir          # default: the conductor's directory
      on_failure: restart     # fail (the default), restart or bypass
    - name: devbox            # a remote component, connected to, not run:
      url: wss://devbox.example.com/acp     # no command, args, env or cwd
      headers:                # each ${VAR} is taken from the environment
        Authorization: "Bearer ${DEVBOX_TOKEN}"
      ping_interval: 30s      # no pong within this fails it; 0s: no pings
  agent:
    name: my-agent
    command: npx
    args: ["-y", "some-agent", "--acp"]
  logging:
    level: info               # debug, info, warn or error
    format: console           # console or json
    file: ""                  # empty means stderr
  shutdown_grace: 2s          # a duration: 500ms, 2s, 1m
  max_message_bytes: 67108864 # at least 1024; serve's default is 32 MiB
                              # less 8 KiB, what the TypeScript SDK's HTTP
                              # client takes: leave it out for serve
  init_timeout: 60s           # the chain must answer initialize by then
  restart_limit: 3            # restarts within restart_window, then it fails
  restart_window: 1m
  restart_backoff: 100ms      # the wait before a restart, doubled for each
  restart_backoff_max: 5s     # earlier one within restart_window, up to this
  mcp_bridge: auto            # auto, stdio or http: how an agent that cannot
                              # call MCP servers over ACP reaches them
  mcp_http_idle_timeout: 30m  # a bridged MCP HTTP session with no request
                              # for this long ends; 0s: never
  spin: 100us                 # how long the relay polls for a fast reply before
                              # it sleeps, for some CPU; 0s: never; at most 1ms;
                              # agent and proxy only (serve does not spin)
  trace:
    file: ""                  # a trace of every message; empty: none
    detail: full              # full, or metadata: without params, results and
                              # error data, safe to share
    serve: ""                 # a loopback address, 127.0.0.1:0, for a live
                              # viewer; empty: none`,
		Example: `  acp-conductor validate --config chain.yaml
  acp-conductor validate chain.yaml
  acp-conductor validate --mode proxy --config inner.yaml
  acp-conductor validate --no-commands chain.yaml   # without looking for each program`,
		Args: wantArgs(0, 1, "chain FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if file != "" {
					return errors.New("validate: give the chain file once, as an argument or with --config")
				}
				file = args[0]
			}
			if file == "" {
				return errors.New("validate: no chain file: give one with --config FILE")
			}
			m := conductor.AgentMode
			switch mode {
			case "agent":
			case "proxy":
				m = conductor.ProxyMode
			default:
				return fmt.Errorf("validate: --mode %q: want agent or proxy", mode)
			}

			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			commands, _ := cmd.Flags().GetBool("commands")
			// Validate reads the file once: it may be a pipe
			// (validate <(generate-chain)), empty when read again.
			cfg, errs, warnings := config.Validate(config.Options{Mode: m, File: file}, commands && !noCommands)
			for _, w := range warnings {
				fmt.Fprintf(errOut, "warning: %s\n", w)
			}
			if len(errs) > 0 {
				fmt.Fprintln(errOut, errs)
				return reportedError{errs}
			}
			fmt.Fprintf(out, "ok: %s\n", cfg.Summary())
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "the chain file to check")
	cmd.Flags().StringVar(&mode, "mode", "agent", "the mode the chain will run in: agent or proxy")
	cmd.Flags().BoolVar(&noCommands, "no-commands", false, "do not look for each component's program (in PATH, or at its path)")
	// --commands=false says the same as --no-commands, for those who write it so.
	cmd.Flags().Bool("commands", true, "look for each component's program (the default)")
	_ = cmd.Flags().MarkHidden("commands")
	return cmd
}
