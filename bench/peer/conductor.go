package main

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
)

// runConductor runs the conductor in-process, in agent mode, for the
// components given as arguments (each one string, as the CLI takes them;
// the last is the agent), with the CPU profile written to $BENCH_CPUPROFILE and the
// allocation profile to $BENCH_MEMPROFILE and an execution trace to
// $BENCH_TRACE, where set, and $BENCH_CONDUCTOR_GOMAXPROCS threads running Go
// code where set (leaving the components' GOMAXPROCS alone). It is the relay
// of the real binary without its command line, configuration and logging.
func runConductor(args []string) error {
	if len(args) == 0 {
		return errors.New("no agent")
	}
	if n, err := strconv.Atoi(os.Getenv("BENCH_CONDUCTOR_GOMAXPROCS")); err == nil {
		runtime.GOMAXPROCS(n) // for this process only, unlike GOMAXPROCS
	}
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	if path := os.Getenv("BENCH_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			return err
		}
		defer func() {
			trace.Stop()
			f.Close()
		}()
	}
	// The components are read as the CLI reads them (shell words, NAME=value
	// prefixes), with the CLI's settings.
	chain, err := config.Load(config.Options{Mode: conductor.AgentMode, Components: args})
	if err != nil {
		return err
	}
	err = conductor.Run(context.Background(), chain.Conductor(nil), conductor.Stdin(), conductor.Stdout())
	if path := os.Getenv("BENCH_MEMPROFILE"); path != "" {
		f, ferr := os.Create(path)
		if ferr != nil {
			return ferr
		}
		runtime.GC()
		pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
	return err
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
