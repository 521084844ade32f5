// Package proxies is a set of small, working ACP proxies to copy from, one
// per directory: context-injector (Go, on the project's proxy library),
// permission-policy (Python), transcript-recorder (Node), and mcp-tools (Go,
// an MCP tool provider over MCP-over-ACP, in a module of its own). See
// README.md. This package's test runs the first three in one chain, as the
// README's chain file does.
package proxies
