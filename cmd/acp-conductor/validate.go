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
	var commands bool
	cmd := &cobra.Command{
		Use:   "validate --config FILE [--mode agent|proxy]",
		Short: "Check a chain file and report every problem with its line",
		Long: `Check a YAML chain file without running anything. Every problem is reported,
each with its line: unknown keys, values of the wrong type, missing commands,
duplicate names, invalid settings. ACP_CONDUCTOR_* environment variables are
applied and checked too, as "agent" and "proxy" would. Prints a one-line
summary and exits 0 if the file is good, and exits 1 otherwise.

A chain file looks like this; only the agent's command is required, and in
proxy mode there is no agent:

  name: my-chain              # shown in logs
  proxies:                    # nearest the editor first; may be empty
    - name: context           # default: base name of the command
      command: ctx-proxy      # required; found in PATH unless it has a slash
      args: ["--flag", "x"]
      env: {API_KEY: abc}     # added to the conductor's environment
      cwd: /some/dir          # default: the conductor's directory
  agent:
    name: my-agent
    command: npx
    args: ["-y", "some-agent", "--acp"]
  logging:
    level: info               # debug, info, warn or error
    format: console           # console or json
    file: ""                  # empty means stderr
  shutdown_grace: 2s          # a duration: 500ms, 2s, 1m
  max_message_bytes: 67108864 # at least 1024`,
		Example: `  acp-conductor validate --config chain.yaml
  acp-conductor validate chain.yaml
  acp-conductor validate --mode proxy --config inner.yaml
  acp-conductor validate --commands chain.yaml   # also look for each program`,
		Args: cobra.MaximumNArgs(1),
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

			cfg, err := config.Load(config.Options{Mode: m, File: file})
			if err == nil && commands {
				err = cfg.CheckCommands()
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				return reportedError{err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %s\n", cfg.Summary())
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "the chain file to check")
	cmd.Flags().StringVar(&mode, "mode", "agent", "the mode the chain will run in: agent or proxy")
	cmd.Flags().BoolVar(&commands, "commands", false, "also check that every component's program can be found")
	return cmd
}
