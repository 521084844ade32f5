// Command peer is the helper program of the benchmark suite (go run ./bench):
// one binary that plays every part of a chain except the conductor, so that
// the direct and the conductor runs use exactly the same peers.
//
//	peer agent                      a fast ACP agent on stdin/stdout
//	peer proxy                      a passthrough proxy built with package proxy
//	peer relay CMD...               launches CMD and copies bytes both ways:
//	                                the cheapest possible process in between
//	peer client -scenario S -- CMD  launches CMD (an agent, or a conductor),
//	                                plays the editor, prints one JSON result
//	peer startparts -- CMD...       launches each CMD (proxies, then the agent)
//	                                at once and initializes each directly
//	peer conductor PROXY... AGENT   conductor.Run in-process, for profiling:
//	                                BENCH_CPUPROFILE and BENCH_MEMPROFILE name
//	                                the profile files
//
// The agent and the client frame and parse with internal/wire, and do as
// little as they can besides, so that what they cost is small and the same
// in every run.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peer agent|proxy|relay|client|startparts|conductor ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "agent":
		err = runAgent()
	case "proxy":
		err = runProxy()
	case "relay":
		err = runRelay(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	case "startparts":
		err = runStartParts(os.Args[2:])
	case "conductor":
		err = runConductor(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "peer %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
