package samples

import _ "embed" // for PermissionPolicyScript

// PermissionPolicyScript is the permission-policy example proxy,
// examples/proxies/permission-policy/permission_policy.py, which the demo
// writes out and runs with python3, so that a binary installed anywhere
// carries it. go:embed cannot reach outside this directory, so the file here
// is a copy; TestPermissionPolicyScript fails when it differs from the
// original, and go generate makes it again.
//
//go:generate cp ../../examples/proxies/permission-policy/permission_policy.py permission_policy.py
//go:embed permission_policy.py
var PermissionPolicyScript []byte
