// Package supervisor keeps the components of a chain, and everything they
// start, from outliving their conductor, without standing between the
// conductor and its components' start.
//
// The conductor starts each component itself, in a process group of its
// own, with the kernel's parent-death signal set to SIGKILL, and with the
// chain's marker in its environment (MarkerEnv: the chain's ID added to the
// IDs of the chains around it, so that a nested conductor's components carry
// both). Whatever a component starts inherits the marker, even in a session
// of its own (setsid). Once the components are started, the conductor starts
// a watchdog (Watch.Launch), which holds the read end of a pipe whose write
// end only the conductor holds, and learns from it when the conductor
// started and the process group of each component (Watch.Started; what is
// said before the watchdog runs waits in the pipe). Should the conductor be killed outright (SIGKILL), the
// components die of their parent-death signal, the pipe reaches its end, and
// the watchdog kills every process group it was told of and every process
// that carries the chain's marker, then exits. Since what it must kill is in
// the pipe or in /proc, a watchdog that has not yet finished its own start-up
// when the conductor dies loses nothing; so it runs at the lowest nice value
// (19). At the chain's end, once every component has been reaped, the
// conductor kills what is left with the marker itself, and what it found
// under the components by their parent links as it began to stop them
// (Watch.Snapshot: a process that left both the session and the
// environment, which the marker cannot find), and then the watchdog,
// which it reaps before Close returns (Watch.Close). What a component orphans is reparented to the conductor
// binary, which adopts it (Adopt: PR_SET_CHILD_SUBREAPER), reaps it when it
// exits and kills it, with what it started, as it ends, or, serving chains
// one after another, whenever none runs (KillAdopted); so the binary
// starts every child through Start, which keeps the children whose exit
// statuses are os/exec's apart from the adopted.
//
// While the conductor lives the watchdog is a shell (/bin/sh, a few lines
// that read the pipe), because a second start of the conductor's Go binary,
// several times the shell's cost, competes with the components' own start;
// at the pipe's end the shell execs the conductor's binary, which does the
// killing (Run: --sweep). Without /bin/sh (a distroless image), the binary
// is the watchdog from the start (Run: --watch).
//
// Without /proc and the parent-death signal (macOS, the BSDs), the
// watchdog is a shell alone that kills the components' process groups at
// the pipe's end (groupWatch): there is no marker, snapshot or adoption,
// and what leaves a component's group is not followed.
//
// The components are children of the conductor, not of a supervisor
// process, because starting a second Go process and waiting for it before
// each component was most of what the conductor added to a chain's
// start-up (make bench: the startup rows).
package supervisor

// Command, WatchFlag and SweepFlag are the arguments that make a binary a
// chain's watchdog (see Run): "BINARY component-supervisor --watch ID",
// with the read end of the conductor's pipe as descriptor 3, or, once the
// pipe has ended, "BINARY component-supervisor --sweep ID MSG...".
const (
	Command   = "component-supervisor"
	WatchFlag = "--watch"
	SweepFlag = "--sweep"
)

// MarkerEnv is the environment variable that marks every process of a
// chain: the IDs of the chains it belongs to, innermost last, separated by
// commas.
const MarkerEnv = "ACP_CONDUCTOR_CHAIN"

// ComponentEnv is the environment variable that marks each start of a
// component, and whatever it starts: the chain's ID and the start's
// number, after those of the components around it (a nested conductor's),
// separated by commas. What carries a component's marker is killed when
// it fails mid-session (Watch.Sweep).
const ComponentEnv = "ACP_CONDUCTOR_COMPONENT"
