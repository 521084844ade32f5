// Command context-injector is an ACP proxy that gives the agent a project's
// standing instructions with every prompt, the way agents read AGENTS.md
// themselves, but for any agent.
//
// It remembers the working directory of each session as the session is set
// up (session/new, session/load, session/resume, session/fork), and puts a
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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("context-injector: ")

	var names []string
	flag.Func("file", "look for an instructions file called `NAME` (repeatable; earlier names win within a directory; default AGENTS.md)", func(name string) error {
		if name == "" || filepath.IsAbs(name) {
			return errors.New("want a file name relative to the session's directory")
		}
		names = append(names, name)
		return nil
	})
	maxBytes := flag.Int64("max-bytes", 32<<10, "inject at most `N` bytes of the file; the rest is left out with a note saying so")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: context-injector [--file NAME]... [--max-bytes N]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *maxBytes <= 0 {
		log.Fatal("--max-bytes must be positive")
	}
	if len(names) == 0 {
		names = []string{"AGENTS.md"}
	}

	inj := newInjector(names, *maxBytes)
	p := inj.proxy()
	p.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Serve returns nil when the conductor closes our stdin, which is how a
	// chain ends.
	if err := p.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		log.Fatal(err)
	}
}
