package permissionpolicy

import _ "embed" // for Script

// Script is permission_policy.py, the proxy itself, for programs that run it
// without a checkout: the demo (examples/demo) writes it out and runs it with
// python3.
//
//go:embed permission_policy.py
var Script []byte
