package conductor

import (
	"context"
	"os"
	"testing"

	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == mcpbridge.ShimCommand {
		// Bridged stdio MCP servers run "<this binary> mcp-shim".
		err := mcpbridge.RunShim(context.Background(), Stdin(), os.Stdout, os.Getenv(mcpbridge.EnvSocket), os.Getenv(mcpbridge.EnvToken))
		if err != nil {
			os.Stderr.WriteString("shim: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if status, ok := supervisor.Run(os.Args[1:]); ok {
		os.Exit(status)
	}
	if role := os.Getenv("ACP_TEST_ROLE"); role != "" {
		runFake(role)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
