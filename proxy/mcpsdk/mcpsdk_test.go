package mcpsdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/acp-conductor/acp-conductor/proxy"
	"github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newServer returns an SDK server whose tools exercise the connection both
// ways: where (the ACP session, through mcpsdk.Conn), greet (structured
// input and output), ask (a sampling request to the client) and wait (which
// says on started that it runs, runs until it is cancelled, and reports
// that on cancelled).
func newServer(started chan<- struct{}, cancelled chan<- error) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-tools", Version: "1.0.0"}, nil)
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "where", Description: "Says which ACP session the call is for."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			c := mcpsdk.Conn(req.Session)
			if c == nil {
				return nil, nil, errors.New("no MCP-over-ACP connection")
			}
			s := c.Session()
			return text("session %s in %s", s.ID, s.Cwd), nil, nil
		})
	type greetIn struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	type greetOut struct {
		Greeting string `json:"greeting"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			return nil, greetOut{"Hello, " + in.Name}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Asks the client's model."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}},
				MaxTokens: 10,
			})
			if err != nil {
				return nil, nil, err
			}
			return text("the model said %s", res.Content.(*mcp.TextContent).Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits to be cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, nil, ctx.Err()
		})
	return s
}

// An SDK client, in an agent behind the conductor, uses an SDK server that
// a proxy serves over MCP-over-ACP: it lists and calls tools, answers the
// server's sampling request, cancels a call, and connects from two sessions
// at once, each connection knowing its own.
func TestServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started, cancelled := make(chan struct{}, 1), make(chan error, 1)
	a := startAgent(t, &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("tools", newServer(started, cancelled))}})
	one := a.newSession("s1", "/work/one")
	two := a.newSession("s2", "/work/two")
	if one["tools"] == "" || two["tools"] == "" || one["tools"] == two["tools"] {
		t.Fatalf("declared %v and %v; want a tools server in each, with ids of their own", one, two)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "4"}}, nil
		},
	})
	cs1, err := client.Connect(ctx, a.connect(one["tools"]), nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	// Sampling from within a request is for protocol versions before
	// 2026-07-28, such as the agents of today speak.
	cs2, err := client.Connect(ctx, a.connect(two["tools"]), &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	if got := cs1.InitializeResult().ServerInfo.Name; got != "test-tools" {
		t.Errorf("server name %q", got)
	}

	tools, err := cs1.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"ask", "greet", "wait", "where"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	for _, tc := range []struct {
		cs   *mcp.ClientSession
		name string
		args any
		want string
	}{
		{cs1, "where", nil, "session s1 in /work/one"},
		{cs2, "where", nil, "session s2 in /work/two"},
		{cs1, "greet", map[string]string{"name": "Ada"}, `{"greeting":"Hello, Ada"}`},
		{cs2, "ask", nil, "the model said 4"},
		{cs1, "greet", map[string]int{"name": 1}, "error: "},
	} {
		res, err := tc.cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.name, Arguments: tc.args})
		if err != nil {
			t.Errorf("tools/call %s: %v", tc.name, err)
			continue
		}
		if got := textOf(t, res); got != tc.want && !(tc.want == "error: " && res.IsError) {
			t.Errorf("tools/call %s: %q, want %q", tc.name, got, tc.want)
		}
	}

	// The client gives up on a call: MCP's notifications/cancelled reaches
	// the server on the connection, and the tool's context is cancelled.
	callCtx, stop := context.WithCancel(ctx)
	go func() { <-started; stop() }() // once the tool runs
	if _, err := cs1.CallTool(callCtx, &mcp.CallToolParams{Name: "wait"}); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v", err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the tool saw %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the tool was not cancelled")
	}

	if err := cs1.Close(); err != nil {
		t.Errorf("closing: %v", err)
	}
	// The other connection is not disturbed.
	if _, err := cs2.ListTools(ctx, nil); err != nil {
		t.Errorf("tools/list on the other connection: %v", err)
	}
	if err := cs2.Close(); err != nil {
		t.Errorf("closing: %v", err)
	}
}

// Disconnecting in the middle of a call ends the server's session on that
// connection, and the call's context with it.
func TestDisconnectCancels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started, cancelled := make(chan struct{}, 1), make(chan error, 1)
	a := startAgent(t, &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("tools", newServer(started, cancelled))}})
	ids := a.newSession("s1", "/w")
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	tr := a.connect(ids["tools"])
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The agent disconnects, as when its MCP client goes away. (The SDK
	// client's own Close would wait for the call first.)
	go func() { <-started; tr.Close() }() // once the tool runs
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait"}); err == nil {
		t.Error("the call survived the disconnect")
	}
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the tool was not cancelled by the disconnect")
	}
	cs.Close()
}

// Conn is nil for sessions on other transports.
func TestConnOtherTransport(t *testing.T) {
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	var got *proxy.MCPConn
	var called bool
	mcp.AddTool(s, &mcp.Tool{Name: "t"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		got, called = mcpsdk.Conn(req.Session), true
		return &mcp.CallToolResult{}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	ss.Wait()
	if !called || got != nil || mcpsdk.Conn(nil) != nil {
		t.Errorf("Conn = %v (called %v), want nil", got, called)
	}
}

// TestServerCancelsItsRequest: a tool gives up on its sampling request (its
// context ends), so the SDK server cancels it with MCP's notification
// under its own id; the client's sampling handler sees its context
// cancelled.
func TestServerCancelsItsRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	asking := make(chan struct{})
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		sctx, giveUp := context.WithCancel(ctx)
		go func() { <-asking; giveUp() }() // once the client has the request
		_, err := req.Session.CreateMessage(sctx, &mcp.CreateMessageParams{
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "?"}}}, MaxTokens: 1})
		giveUp()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("gave up: ", err)}}}, nil, nil
	})
	a := startAgent(t, &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("tools", s)}})
	one := a.newSession("s1", "/w")
	sampling := make(chan error, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(hctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			close(asking)
			select {
			case <-hctx.Done():
				sampling <- hctx.Err()
			case <-ctx.Done():
				sampling <- nil
			}
			return nil, hctx.Err()
		},
	})
	cs, err := client.Connect(ctx, a.connect(one["tools"]), &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"}); err != nil {
		t.Fatal(err)
	}
	if err := <-sampling; err == nil {
		t.Error("the server cancelled its sampling request, but the client's handler was not cancelled")
	}
}
