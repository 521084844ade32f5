// Command mcp-tools is an ACP proxy that gives the agent tools of its own:
// an MCP server, served over the ACP connection itself as the MCP-over-ACP
// RFD describes, with no process or port for the agent to manage. Its tool
// list_files lists the files of the session's working directory, or of a
// directory under it, and never those outside it.
//
// The proxy is built on the project's proxy library, which declares the
// server in every session the editor sets up and carries the agent's MCP
// connections, and on its mcpsdk module, which lets a server of the official
// MCP Go SDK serve them. The library gives each session its own server id,
// so a connection knows its session, and list_files which directory to list.
// Every message other than MCP's passes through untouched.
//
// Usage:
//
//	mcp-tools [--name NAME] [--max-entries N]
//
// For example, in a chain:
//
//	acp-conductor agent "mcp-tools" "npx -y @zed-industries/claude-agent-acp"
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/acp-conductor/acp-conductor/proxy"
	"github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("mcp-tools: ")
	name := flag.String("name", "files", "declare the MCP server to the agent as `NAME`")
	maxEntries := flag.Int("max-entries", 500, "list at most `N` entries per call; the answer says when there were more")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: mcp-tools [--name NAME] [--max-entries N]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || *name == "" || *maxEntries <= 0 {
		flag.Usage()
		os.Exit(2)
	}

	p := &proxy.Proxy{
		MCPServers: []*proxy.MCPServer{mcpsdk.Server(*name, newServer(*maxEntries))},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	// Serve returns nil when the conductor closes our stdin, which is how a
	// chain ends.
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
}
