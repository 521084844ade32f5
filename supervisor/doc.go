// Package supervisor is the process entry point that runs one component of
// a chain so that it cannot outlive its conductor.
//
// The conductor starts each component as "BINARY component-supervisor --
// CMD ARGS..." when Config.Supervisor names a binary whose main calls Run
// for that argument (acp-conductor's does). The supervisor exists for one
// case no handler sees: the conductor killed with SIGKILL. The kernel then
// sends the supervisor its parent-death signal, and the supervisor kills
// what the component started.
package supervisor

// Command is the argument that makes a binary a component supervisor:
// "BINARY component-supervisor -- CMD ARGS...".
const Command = "component-supervisor"
