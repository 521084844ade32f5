// Package permissionpolicy holds the permission-policy example proxy, which
// is a Python program (permission_policy.py); the Go side embeds it (Script)
// and tests it in a real chain. See README.md.
package permissionpolicy
