// Command toolproxy is the ACP proxy that owns the MCP server in the MCP
// integration tests. It is built the way a proxy author would build one: on
// the project's proxy library, with an official MCP Go SDK server adapted
// by proxy/mcpsdk, declared in every session as "it-tools".
//
// The server has one tool, greet {"name": string}, which asks the client for
// its roots while it runs, so that every call carries a server-to-client
// round trip:
//
//   - with a client on a protocol revision before 2026-07-28, the handler
//     sends roots/list to the client itself (ServerSession.ListRoots), a
//     request that travels back through the chain to the agent's MCP client;
//   - with a client on 2026-07-28 or later, where servers may no longer send
//     requests of their own, it answers input_required with a roots/list
//     input request, which the client fulfils and retries with (SEP-2322).
//
// Either way the result reads
//
//	hello, NAME; roots: URI,...; via: roots/list request|input response; session: ID
//
// and, before the result, the call's progress token (if any) gets one
// notifications/progress with the message "greeting NAME": a
// server-to-client notification.
//
// Two more tools test cancellation: wait reports progress ("waiting"),
// then runs until its context ends; waited returns, as "cancelled: N", how
// many waits have ended, once one has (or after ten seconds, with 0). An
// agent that cancels a wait and then calls waited on the same connection
// learns whether its cancel reached the server.
//
// The proxy also answers the ACP extension request _it/mcp_connections from
// its predecessor (the tests' editor): once no MCP connection is open and at
// least one has been opened, or when the request's context ends, it returns
// every connection it has served, with its ACP session and how it ended.
// That is how the tests see the owner's side of the agent's disconnect.
//
// Everything else passes through untouched.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy"
	"github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
)

// serverName is the name the MCP server is declared with.
const serverName = "it-tools"

func main() {
	log.SetFlags(0)
	log.SetPrefix(fmt.Sprintf("[toolproxy %d] ", os.Getpid()))

	srv := mcp.NewServer(&mcp.Implementation{Name: "toolproxy", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone, naming the client's roots"}, greet)
	rec := newRecorder()
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Runs until cancelled"}, rec.wait)
	mcp.AddTool(srv, &mcp.Tool{Name: "waited", Description: "How many waits were cancelled"}, rec.waited)

	s := mcpsdk.Server(serverName, srv)
	serve := s.Serve
	s.Serve = func(ctx context.Context, c *proxy.MCPConn) error {
		rec.opened(c)
		err := serve(ctx, c)
		rec.closed(c, endedByClient(c), err)
		return err
	}

	p := &proxy.Proxy{
		MCPServers:      []*proxy.MCPServer{s},
		FromPredecessor: map[string]proxy.Handler{"_it/mcp_connections": rec.report},
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	log.Print("started")
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
	log.Print("stdin closed; exiting")
}

// endedByClient reports whether c, which the server is done with, was ended
// from the client's side (mcp/disconnect, or the proxy stopping) rather than
// by the server: after the former, Read returns what was left unread and
// then io.EOF; after Close, proxy.ErrClosed.
func endedByClient(c *proxy.MCPConn) bool {
	done, cancel := context.WithCancel(context.Background())
	cancel() // Read must not wait: the connection has ended, or it is a bug
	for {
		_, err := c.Read(done)
		if err != nil {
			return errors.Is(err, io.EOF)
		}
	}
}

type greetIn struct {
	Name string `json:"name" jsonschema:"whom to greet"`
}

// protocol20260728 is the first MCP revision in which servers may not send
// requests of their own while serving one.
const protocol20260728 = "2026-07-28"

func greet(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
	var roots []*mcp.Root
	var via string
	// A stateless session (2026-07-28) has no initialize params; the SDK
	// takes it to be on the latest revision too.
	ip := req.Session.InitializeParams()
	switch {
	case ip != nil && ip.ProtocolVersion < protocol20260728:
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("asking the client for its roots: %w", err)
		}
		roots, via = res.Roots, "roots/list request"
	default:
		res, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
		}
		roots, via = res.Roots, "input response"
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: tok, Progress: 1, Total: 1, Message: "greeting " + in.Name,
		}); err != nil {
			return nil, nil, fmt.Errorf("notifying progress: %w", err)
		}
	}
	uris := make([]string, len(roots))
	for i, r := range roots {
		uris[i] = r.URI
	}
	session := ""
	if c := mcpsdk.Conn(req.Session); c != nil {
		session = c.Session().ID
	}
	text := fmt.Sprintf("hello, %s; roots: %s; via: %s; session: %s", in.Name, strings.Join(uris, ","), via, session)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// A recorder keeps track of the MCP connections the server has served,
// and of the waits that ended.
type recorder struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	conns   []*connRecord
	open    int
	ended   int // waits
}

type nothing struct{}

func (r *recorder) wait(ctx context.Context, req *mcp.CallToolRequest, _ greetIn) (*mcp.CallToolResult, any, error) {
	if tok := req.Params.GetProgressToken(); tok != nil {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "waiting"}); err != nil {
			return nil, nil, fmt.Errorf("notifying progress: %w", err)
		}
	}
	<-ctx.Done()
	r.mu.Lock()
	r.ended++
	r.signal()
	r.mu.Unlock()
	log.Print("a wait ended: ", context.Cause(ctx))
	return nil, nil, ctx.Err()
}

func (r *recorder) waited(ctx context.Context, _ *mcp.CallToolRequest, _ nothing) (*mcp.CallToolResult, any, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r.mu.Lock()
	for r.ended == 0 && ctx.Err() == nil {
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		r.mu.Lock()
	}
	n := r.ended
	r.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("cancelled: %d", n)}}}, nil, nil
}

type connRecord struct {
	ID        string `json:"connectionId"`
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Open      bool   `json:"open"`
	// ClientDisconnected: the connection ended because the client
	// disconnected (or the proxy stopped), not because the server did.
	ClientDisconnected bool   `json:"clientDisconnected"`
	Error              string `json:"error,omitempty"`
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) opened(c *proxy.MCPConn) {
	s := c.Session()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, &connRecord{ID: c.ID(), SessionID: s.ID, Cwd: s.Cwd, Open: true})
	r.open++
	r.signal()
	log.Printf("MCP connection %s opened (session %s)", c.ID(), s.ID)
}

func (r *recorder) closed(c *proxy.MCPConn, byClient bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.conns {
		if rec.ID == c.ID() && rec.Open {
			rec.Open, rec.ClientDisconnected = false, byClient
			if rec.SessionID == "" {
				rec.SessionID = c.Session().ID
			}
			if err != nil {
				rec.Error = err.Error()
			}
			r.open--
		}
	}
	r.signal()
	log.Printf("MCP connection %s closed (by the client: %v, error: %v)", c.ID(), byClient, err)
}

// signal wakes every report waiting for a change. r.mu must be held.
func (r *recorder) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// report answers _it/mcp_connections once every connection opened so far
// has closed (and there has been one), or when ctx ends.
func (r *recorder) report(ctx context.Context, req *proxy.Request) (json.RawMessage, error) {
	req.Detach() // it waits for the agent, not for a peer of the proxy
	for {
		r.mu.Lock()
		settled := r.open == 0 && len(r.conns) > 0
		changed := r.changed
		if settled || ctx.Err() != nil {
			b, err := json.Marshal(map[string]any{"settled": settled, "connections": r.conns})
			r.mu.Unlock()
			return b, err
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}
