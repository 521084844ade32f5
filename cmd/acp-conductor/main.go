// Command acp-conductor runs a chain of Agent Client Protocol proxies and a
// final agent behind a single stdio connection, so an editor sees one agent.
//
// Its agent and proxy commands follow the Rust sacp-conductor's command line:
// each positional argument is one component, a shell-words string; in agent
// mode the last one is the agent. A YAML chain file (--config) may replace
// the arguments. The validate command checks a chain file. A complete chain
// to watch at work is the demo, a separate program (examples/demo, make demo).
// Standard output carries only the protocol; logs go to stderr or a file.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

func main() {
	// A watchdog is started at every chain start, beside its components:
	// skip the rest.
	if status, ok := supervisor.Run(os.Args[1:]); ok {
		os.Exit(status)
	}
	// What a chain's components orphan comes to the conductor rather than
	// to init: reaped as it exits, killed once the chains have stopped.
	release, err := supervisor.Adopt()
	if err != nil {
		fmt.Fprintf(os.Stderr, "acp-conductor: %v\n", err)
	}
	status := run(os.Args[1:])
	release()
	os.Exit(status)
}

// run executes the command line and returns the process exit status.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var shown reportedError
	if !errors.As(err, &shown) {
		fmt.Fprintf(os.Stderr, "acp-conductor: %v\n", err)
	}
	return 1
}

// A reportedError has already been shown to the user, in a log or a list of
// problems; main only turns it into the exit status.
type reportedError struct{ error }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "acp-conductor",
		Short: "Run a chain of ACP proxies in front of an agent",
		Long: `acp-conductor sits between an editor and an AI coding agent that speak the
Agent Client Protocol (ACP) over stdio. It starts a chain of proxy programs
and a final agent, presents the whole chain to the editor as a single agent,
and relays every message through the proxies, which may rewrite prompts,
filter responses or add context (the ACP proxy-chains RFD).

Configure your editor to run "acp-conductor agent ..." where it would have run
the agent. A chain is given either as arguments, one quoted string per
component with the agent last, or as a YAML chain file with --config.

Settings are taken from flags, then ACP_CONDUCTOR_* environment variables
(listed below), then the chain file, then defaults; components do not
inherit the settings' variables. Standard output carries only the protocol;
logs go to stderr or to --log-file.

` + environmentHelp(),
		Example: `  # Put a proxy in front of an agent:
  acp-conductor agent "ctx-proxy --flag x" "npx -y some-agent --acp"

  # Check a chain file, then run it:
  acp-conductor validate --config chain.yaml
  acp-conductor agent --config chain.yaml`,
		Version:       version(),
		SilenceErrors: true, // run prints them, once
		SilenceUsage:  true, // a failed chain is not a usage mistake
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())
	})
	root.AddCommand(
		newAgentCmd(),
		newProxyCmd(),
		newValidateCmd(),
		newMCPShimCmd(),
		newSuperviseCmd(),
		newServeCmd(),
		newRemoteConnectCmd(),
		newTraceCmd(),
	)
	// cobra would add its help and completion commands as the root runs;
	// added now, they get examples like every other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = `  acp-conductor help agent
  acp-conductor help trace view`
			// cobra's help prints the root's usage for a topic it does not
			// know and exits 0; it is refused, as a command would be.
			show := c.Run
			c.Run, c.RunE = nil, func(c *cobra.Command, args []string) error {
				// The root takes a word it does not know as an argument.
				if cmd, _, err := c.Root().Find(args); cmd == nil || err != nil || cmd == c.Root() && len(args) > 0 {
					return fmt.Errorf("unknown help topic %q: run 'acp-conductor help' for the commands", strings.Join(args, " "))
				}
				show(c, args)
				return nil
			}
		case "completion":
			c.Example = `  # Complete commands and flags in this bash session:
  source <(acp-conductor completion bash)`
			for _, sh := range c.Commands() {
				sh.Example = completionExamples[sh.Name()]
			}
		}
		// cobra shows the help of a command that only groups others (trace,
		// completion) for any word after it, and exits 0, so that a typo
		// (trace vew) looks like success to a script; such a command
		// refuses one instead, as the root refuses an unknown command.
		refuseUnknown(c)
	}
	// The root too, whose own refusal (cobra's) says nothing of --help.
	refuseUnknown(root)
	// Run bare, as an editor configured with the command alone runs it,
	// the root's help on stdout would reach the editor as the protocol,
	// and exit 0 would say all is well: it goes to stderr, and the exit
	// says failure, as go's does. --help and help still print to stdout.
	root.RunE = func(c *cobra.Command, _ []string) error {
		c.SetOut(c.ErrOrStderr())
		c.Help()
		return errors.New(`no command given: an editor runs "acp-conductor agent [PROXY...] AGENT"`)
	}
	return root
}

// refuseUnknown makes c, if it only groups others, refuse a word that
// names none of them, with suggestions and where its usage is, and show
// its help when it is given none.
func refuseUnknown(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = wantArgs(0, 0, "")
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
}

// completionExamples load each shell's completions for the session, as the
// completion commands' help says.
var completionExamples = map[string]string{
	"bash":       "  source <(acp-conductor completion bash)",
	"zsh":        "  source <(acp-conductor completion zsh)",
	"fish":       "  acp-conductor completion fish | source",
	"powershell": "  acp-conductor completion powershell | Out-String | Invoke-Expression",
}

// environmentHelp lists every environment variable a user may set, made
// from config's settings table so that it cannot go stale.
func environmentHelp() string {
	var b strings.Builder
	b.WriteString("Environment:")
	for _, v := range config.Environment() {
		fmt.Fprintf(&b, "\n  %s\n        %s", v.Name, v.Usage)
	}
	return b.String()
}

// version reports the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// wantArgs accepts between min and max positional arguments, described by
// what ("FILE", "URL"), and refuses any other count naming the command,
// what it takes and where its usage is: cobra's own "accepts 1 arg(s),
// received 0" names neither. A word given to a command that takes none is
// likely a subcommand mistyped, and gets cobra's suggestions.
func wantArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && len(args) <= max {
			return nil
		}
		hint := fmt.Sprintf("\nRun '%s --help' for usage.", cmd.CommandPath())
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") // main says acp-conductor
		switch {
		case max == 0 && cmd.HasSubCommands():
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // as cobra's root suggests
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint = "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n" + hint
			}
			return fmt.Errorf("unknown command %q for %q%s", args[0], cmd.CommandPath(), hint)
		case max == 0:
			return fmt.Errorf("%s takes no arguments, got %q%s", name, args, hint)
		case min == max:
			return fmt.Errorf("%s takes one %s, got %d arguments%s", name, what, len(args), hint)
		default:
			return fmt.Errorf("%s takes at most one %s, got %d arguments%s", name, what, len(args), hint)
		}
	}
}
