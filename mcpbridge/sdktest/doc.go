// Package sdktest checks mcpbridge against a real MCP client, the official
// MCP Go SDK's, over both transports: the SDK launches the shim from a stdio
// declaration as an agent would, or connects to an HTTP declaration's URL,
// and a small MCP server written by hand answers on the bridge's side.
//
// It is a module of its own so that the SDK never becomes a dependency of
// acp-conductor.
package sdktest
