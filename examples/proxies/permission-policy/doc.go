// Package permissionpolicy holds the permission-policy example proxy, which
// is a Python program (permission_policy.py); the Go files are only its test,
// which runs it in a real chain. See README.md.
package permissionpolicy
