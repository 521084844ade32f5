package main

import (
	"os"
	"runtime"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/trick"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// spinLimit bounds how long the relay polls its inputs before it sleeps: a
// proxy's or a local agent's reply within it wakes nothing (wire.EnableSpin;
// make bench's spin row shows what it buys and costs).
const spinLimit = 50 * time.Microsecond

// spinBeforeWaits lets one chain's relay spin before it waits, where that
// pays, and says whether it does. It does not where one CPU would be shared
// with the peer being waited for; inside another conductor's chain, whose
// relay spins already, since two spinners would take both CPUs of a small
// machine from the components; or where GOMAXPROCS is set, since the
// spinner needs the process to run Go code on one P, which it sets.
func spinBeforeWaits() bool {
	if !trick.On(trick.Spin) || runtime.NumCPU() < 2 ||
		os.Getenv(supervisor.MarkerEnv) != "" || os.Getenv("GOMAXPROCS") != "" {
		return false
	}
	prev := runtime.GOMAXPROCS(1)
	if !wire.EnableSpin(spinLimit) {
		runtime.GOMAXPROCS(prev)
		return false
	}
	return true
}
