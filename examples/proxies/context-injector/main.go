// Command context-injector is an ACP proxy that gives the agent a project's
// standing instructions with every prompt, the way agents read AGENTS.md
// themselves, but for any agent.
//
// It remembers the working directory of each session as the session is set
// up (session/new, session/load, session/resume, session/fork), until it is
// closed or deleted, and puts a
// text block in front of each session/prompt holding the instructions file
// nearest that directory: the first of the --file names found in the
// directory itself, else in its parent, and so on up to the root. The file is
// read again for every prompt, so edits take effect at the next one. A prompt
// for a session whose directory is unknown, or with no file above it, passes
// through unchanged, as does every other message. It is built on the
// project's proxy library, which does the proxy-chain plumbing.
//
// Usage:
//
//	context-injector [--file NAME]... [--max-bytes N]
//
// For example, in a chain:
//
//	acp-conductor agent "context-injector --file AGENTS.md --file CLAUDE.md" "my-agent --acp"
//
// The proxy itself is package injector (./injector), which other programs
// can import: acp-conductor's demo runs it from its own binary.
package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/acp-conductor/acp-conductor/examples/proxies/context-injector/injector"
	"github.com/acp-conductor/acp-conductor/proxy"
)

func main() {
	// Run returns nil when the conductor closes our stdin, which is how a
	// chain ends.
	err := injector.Run(context.Background(), os.Args[1:], proxy.Stdin(), proxy.Stdout(), os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, injector.ErrUsage):
		os.Exit(2) // already explained on stderr
	default:
		os.Stderr.WriteString("context-injector: " + err.Error() + "\n")
		os.Exit(1)
	}
}
