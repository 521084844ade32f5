// Command demo runs a complete acp-conductor chain with nothing to set up,
// and prints the conversation: a scripted client, two of the example proxies
// (context-injector and permission-policy), a sample proxy and a scripted
// agent, all in this one binary but for the Python proxy, under a real
// acp-conductor process. `make demo` builds both programs and runs it.
//
// It is a program that uses the project, not a part of it: acp-conductor
// itself imports neither the demo nor the examples.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	root := newDemoCmd()
	root.SilenceErrors = true // main prints them, once
	root.SilenceUsage = true  // a failed chain is not a usage mistake
	root.AddCommand(newSampleAgentCmd(), newSampleProxyCmd(), newContextInjectorCmd())
	if err := root.Execute(); err != nil {
		var shown reportedError
		if !errors.As(err, &shown) {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
		os.Exit(1)
	}
}

// A reportedError has already been shown to the user; main only turns it
// into the exit status.
type reportedError struct{ error }
