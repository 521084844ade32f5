// Package trick names the platform tricks on the conductor's hot path, so
// that the benchmark can turn each one off and show, in the same run, what
// it buys. A trick stays in the code only while it does (bench/README.md).
//
// ACP_BENCH_DISABLE, a comma-separated list of the names below, turns
// tricks off in every process that reads it: the conductor, and the
// proxy-library proxies it starts, which inherit its environment. It is
// meant for the benchmark, not for users; an unknown name is ignored.
package trick

import (
	"os"
	"strings"
)

// The tricks.
const (
	// RawIO: reads and writes on non-blocking pipes and sockets go through
	// raw system calls, which never block, so they do not wake the
	// runtime's monitor thread as each blocking-capable call does after an
	// idle spell.
	RawIO = "rawio"
	// Writev: a burst queued for one peer is written with one writev(2).
	Writev = "writev"
	// Scratch: lines longer than the read buffer are gathered off the Go
	// heap and copied out once.
	Scratch = "scratch"
	// Collect: the conductor collects garbage after 4 MiB of large lines
	// have been written.
	Collect = "collect"
	// Pollable: standard input and output, when pipes or sockets, are put
	// in non-blocking mode and read and written through Go's poller.
	Pollable = "pollable"
	// Spin: a reader that finds its input empty polls the inputs that wait
	// for up to the spin setting (100 µs by default) before it sleeps,
	// adaptively, and the conductor runs Go code on one P, so that a reply
	// that comes soon wakes nothing (wire.EnableSpin).
	Spin = "spin"
	// Lend: a line relayed as it came is written from the read buffer it
	// was read into, not from a copy (wire.LineChannel.Lend).
	Lend = "lend"
	// Supervisor: each chain has a watchdog process and marks its
	// components, so that nothing they start outlives the conductor, even
	// killed with SIGKILL (package supervisor). Not a trick but a
	// guarantee; turning it off shows what it costs at start-up.
	Supervisor = "supervisor"
)

// Env is the variable that lists the tricks turned off.
const Env = "ACP_BENCH_DISABLE"

var off = parse(os.Getenv(Env))

func parse(s string) map[string]bool {
	m := make(map[string]bool)
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
}

// On reports whether the named trick is in use.
func On(name string) bool { return !off[name] }
