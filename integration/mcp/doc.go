// Package mcp tests MCP-over-ACP end to end, with real MCP peers on both
// ends: the official MCP Go SDK serves a tool from a proxy (testdata/toolproxy)
// and is the MCP client of an ACP agent (testdata/sdkagent), with the
// acp-conductor binary, and a passthrough proxy, between them. See README.md.
package mcp
