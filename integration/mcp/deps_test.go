package mcp

// The test programs under testdata, which the go command leaves out of
// ./... and of go mod tidy, are built from this module; these imports keep
// their requirements in go.mod.
import (
	_ "github.com/acp-conductor/acp-conductor/proxy"
	_ "github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
	_ "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
)
