// Package supervisor runs the components of a chain so that none of them,
// nor anything they start, outlives their conductor.
//
// The conductor starts one supervisor per chain, "BINARY
// component-supervisor --chain" (StartChain), when Config.Supervisor names a
// binary whose main calls RunChain for those arguments (acp-conductor's
// does), and has it start every component (Chain.Spawn). The supervisor is
// a child subreaper: whatever a component starts and leaves behind, even in
// a session of its own (setsid), becomes its child rather than init's. It
// exists for one case no handler sees: the conductor killed with SIGKILL.
// The kernel then sends the supervisor its parent-death signal, and the
// supervisor kills every process below it. When the conductor closes the
// control socket, at the end of its run, the supervisor likewise kills what
// is left and exits.
//
// One supervisor serves the whole chain, rather than one per component,
// because starting a Go process is most of what the conductor adds to a
// chain's start-up (make bench: the startup rows).
package supervisor

// Command and ChainFlag are the arguments that make a binary a chain's
// supervisor: "BINARY component-supervisor --chain", with the control
// socket as descriptor 3.
const (
	Command   = "component-supervisor"
	ChainFlag = "--chain"
)

// A spawn is the conductor's request to start one component; its stdin,
// stdout and stderr travel with it as SCM_RIGHTS.
type spawn struct {
	Path string   `json:"path"`
	Args []string `json:"args"` // argv, the program's name first
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env"`
}

// An event is the supervisor's answer to a spawn (PID or Error), or the
// end of a component (Exited, with its wait status).
type event struct {
	PID    int    `json:"pid,omitempty"`
	Error  string `json:"error,omitempty"`
	Exited int    `json:"exited,omitempty"`
	Status uint32 `json:"status,omitempty"`
}
