package main

import (
	"os"
	"runtime"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/trick"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// spinBeforeWaits lets one chain's relay spin for up to limit (the spin
// setting) before it waits, where that pays, and says whether it does: a
// proxy's or a local agent's reply within limit wakes nothing
// (wire.EnableSpin; make bench's spin row shows what it buys and costs).
// It does not where limit is 0, the user's no; where one CPU would be
// shared with the peer being waited for (the runtime's default GOMAXPROCS
// counts the CPUs the process may use: its affinity, and a container's CPU
// limit, which NumCPU does not); inside another conductor's chain,
// whose relay spins already, since two spinners would take both CPUs of a
// small machine from the components; or where GOMAXPROCS is set, since the
// spinner needs the process to run Go code on one P, which it sets. Where
// it does not spin, GOMAXPROCS is left alone.
func spinBeforeWaits(limit time.Duration) bool {
	if limit <= 0 || !trick.On(trick.Spin) || runtime.GOMAXPROCS(0) < 2 ||
		os.Getenv(supervisor.MarkerEnv) != "" || os.Getenv("GOMAXPROCS") != "" {
		return false
	}
	prev := runtime.GOMAXPROCS(1)
	if !wire.EnableSpin(limit) {
		runtime.GOMAXPROCS(prev)
		return false
	}
	return true
}
