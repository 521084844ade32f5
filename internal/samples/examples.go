package samples

import permissionpolicy "github.com/acp-conductor/acp-conductor/examples/proxies/permission-policy"

// PermissionPolicyScript is the permission-policy example proxy, which the
// demo writes out and runs with python3, so that a binary installed anywhere
// carries it.
var PermissionPolicyScript = permissionpolicy.Script
