package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/acp-conductor/acp-conductor/mcpbridge"
)

// binary is acp-conductor, built from the root module, whose mcp-shim the
// stdio declarations run.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sdktest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "acp-conductor")
	build := exec.Command("go", "build", "-o", binary, "./cmd/acp-conductor")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building acp-conductor: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// serveMCP is a minimal MCP server on the conductor's side of a Conn, in
// place of the server's owner: it answers initialize, tools/list with one
// tool, and tools/call, during which it asks the client for its roots, so a
// server-to-client request and its response cross the transport too.
// Anything else, server/discover included, is method-not-found, as from a
// server that predates revision 2026-07-28.
func serveMCP(ctx context.Context, c *mcpbridge.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // releases calls waiting for the client

	var mu sync.Mutex
	replies := make(map[string]chan json.RawMessage) // our requests' ids
	asks := 0
	reply := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		c.Send(b)
	}
	for {
		msg, err := c.Recv()
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		switch {
		case m.Method == "": // the client answering us
			mu.Lock()
			ch := replies[string(m.ID)]
			delete(replies, string(m.ID))
			mu.Unlock()
			if ch != nil {
				ch <- m.Result
			}
		case m.ID == nil: // notifications need nothing
		case m.Method == "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.Params, &p)
			reply(m.ID, map[string]any{
				"protocolVersion": p.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "sdktest", "version": "1"},
			})
		case m.Method == "ping":
			reply(m.ID, map[string]any{})
		case m.Method == "tools/list":
			reply(m.ID, map[string]any{"tools": []any{map[string]any{
				"name":        "echo",
				"description": "Echoes its text, with the client's first root",
				"inputSchema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"text": map[string]any{"type": "string"}},
					"required":   []string{"text"},
				},
			}}})
		case m.Method == "tools/call":
			mu.Lock()
			asks++
			askID := fmt.Sprintf(`"roots-%d"`, asks)
			ch := make(chan json.RawMessage, 1)
			replies[askID] = ch
			mu.Unlock()
			wg.Go(func() {
				c.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"roots/list"}`, askID))
				var roots struct {
					Roots []struct{ URI string }
				}
				select {
				case res := <-ch:
					json.Unmarshal(res, &roots)
				case <-ctx.Done():
					return
				}
				var p struct {
					Arguments struct{ Text string }
				}
				json.Unmarshal(m.Params, &p)
				root := ""
				if len(roots.Roots) > 0 {
					root = roots.Roots[0].URI
				}
				reply(m.ID, map[string]any{"content": []any{map[string]any{
					"type": "text",
					"text": fmt.Sprintf("%s from %s, root %s", p.Arguments.Text, c.ServerID, root),
				}}})
			})
		default:
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID,
				"error": map[string]any{"code": -32601, "message": "method not found: " + m.Method}})
			c.Send(b)
		}
	}
}

// startBridge serves a bridge with serveMCP until the test ends.
func startBridge(t *testing.T) *mcpbridge.Bridge {
	t.Helper()
	b, err := mcpbridge.New(mcpbridge.Options{Executable: binary, HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, serveMCP) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		b.Close()
	})
	return b
}

// exercise connects an SDK client over t and uses the one tool.
func exercise(t *testing.T, transport mcp.Transport, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "sdktest-client", Version: "1"}, nil)
	client.AddRoots(&mcp.Root{URI: "file:///project"})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v == "" {
		t.Error("no protocol version negotiated")
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools: %+v", tools.Tools)
	}
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint("hello ", i)}})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		want := fmt.Sprintf("hello %d from %s, root file:///project", i, server)
		if len(res.Content) != 1 {
			t.Fatalf("CallTool result: %+v", res)
		}
		if text, ok := res.Content[0].(*mcp.TextContent); !ok || text.Text != want {
			t.Errorf("CallTool result: %+v, want %q", res.Content[0], want)
		}
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestSDKClientOverStdio(t *testing.T) {
	b := startBridge(t)
	decl := b.Stdio("srv-stdio", "tools")
	// Exactly what an agent does with an McpServerStdio.
	cmd := exec.Command(decl.Command, decl.Args...)
	cmd.Env = os.Environ()
	for _, e := range decl.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	exercise(t, &mcp.CommandTransport{Command: cmd}, "srv-stdio")
	// Closing the session closed the shim's stdin; it exited cleanly.
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("shim: %v; stderr: %s", cmd.ProcessState, stderr.String())
	}
}

func TestSDKClientOverHTTP(t *testing.T) {
	b := startBridge(t)
	decl, err := b.HTTP("srv-http", "tools")
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, httpTransport(t, decl, false), "srv-http")
}

func TestSDKClientOverHTTPWithoutGETStream(t *testing.T) {
	b := startBridge(t)
	decl, err := b.HTTP("srv-http", "tools")
	if err != nil {
		t.Fatal(err)
	}
	// Server requests then travel on the tool call's own SSE stream.
	exercise(t, httpTransport(t, decl, true), "srv-http")
}

// httpTransport is the SDK's streamable HTTP client for decl, sending its
// headers as an agent does.
func httpTransport(t *testing.T, decl mcpbridge.HTTPServer, noGET bool) *mcp.StreamableClientTransport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	h := http.Header{}
	for _, kv := range decl.Headers {
		h.Add(kv.Name, kv.Value)
	}
	return &mcp.StreamableClientTransport{Endpoint: decl.URL, HTTPClient: &http.Client{Transport: withHeaders{h, tr}}, DisableStandaloneSSE: noGET}
}

// withHeaders adds headers to every request.
type withHeaders struct {
	h  http.Header
	rt http.RoundTripper
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.h {
		r.Header[k] = v
	}
	return w.rt.RoundTrip(r)
}

// TestSDKClientWithoutToken: the SDK's client, given the URL but not the
// declaration's headers, is refused before any MCP reaches the bridge.
func TestSDKClientWithoutToken(t *testing.T) {
	b := startBridge(t)
	decl, err := b.HTTP("srv-http", "tools")
	if err != nil {
		t.Fatal(err)
	}
	decl.Headers = nil
	_, err = mcp.NewClient(&mcp.Implementation{Name: "sdktest"}, nil).Connect(t.Context(), httpTransport(t, decl, false), nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("Connect without the token: %v, want Unauthorized", err)
	}
}

func TestSDKClientsConcurrently(t *testing.T) {
	b := startBridge(t)
	var wg sync.WaitGroup
	for i := range 3 {
		server := fmt.Sprint("srv-", i)
		decl, _ := b.HTTP(server, "tools")
		stdio := b.Stdio(server, "tools")
		wg.Go(func() { exercise(t, httpTransport(t, decl, false), server) })
		wg.Go(func() {
			cmd := exec.Command(stdio.Command, stdio.Args...)
			cmd.Env = os.Environ()
			for _, e := range stdio.Env {
				cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
			}
			exercise(t, &mcp.CommandTransport{Command: cmd}, server)
		})
	}
	wg.Wait()
}
