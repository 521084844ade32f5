package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A Proxy says what one ACP proxy does differently from forwarding. Its zero
// value forwards everything. A Proxy is not modified by Serve and may serve
// any number of connections, concurrently.
type Proxy struct {
	// Name names the proxy in the errors it answers with, such as that for
	// a request its input ended under. Empty means the program's name.
	Name string

	// FromPredecessor maps methods to the handlers for requests and
	// notifications arriving from the predecessor (the client side).
	// The handler for "initialize", if any, handles proxy/initialize: its
	// Forward initializes the successor, and whatever it returns is sent
	// back with agentCapabilities.mcpCapabilities.acp set to true.
	FromPredecessor map[string]Handler

	// FromSuccessor maps methods to the handlers for requests and
	// notifications arriving from the successor (the agent side), keyed by
	// the method inside their proxy/successor envelope.
	//
	// Serve warns, through Logger, of a handler keyed where it can never
	// run: under an envelope's or a proxy initialize's method, under
	// $/cancel_request, under an ACP method only the other side sends
	// (session/update in FromPredecessor, session/prompt in FromSuccessor),
	// or under an ACP method spelt otherwise, as
	// session/requestPermission for session/request_permission.
	FromSuccessor map[string]Handler

	// Logger receives reports of traffic the proxy had to drop or refuse,
	// of handlers that panicked, and of MCP servers that failed. Nil writes
	// warnings and errors as text to standard error, which a conductor logs
	// for each of its components (standard output carries only the
	// protocol), leaving out the time under acp-conductor, which adds it;
	// slog.New(slog.DiscardHandler) discards them.
	Logger *slog.Logger

	// MaxMessageBytes bounds one incoming message, as its sender wrote it:
	// a successor's message may arrive with up to 4 KiB more, for its
	// envelope. A request past it is refused (-32600), an answer past it
	// fails the call it answers, a notification is dropped, and the proxy
	// goes on. Zero means 64 MiB, well above what the ACP SDKs send.
	MaxMessageBytes int

	// HoldWarning is how long a handler may hold its place in the outgoing
	// order (running, neither waiting for a peer nor detached) before the
	// proxy warns, through Logger, naming its method: everything behind
	// it, both ways, waits meanwhile, which a handler that blocks on a
	// person or a slow tool without calling [Request.Detach] does not
	// mean. Zero means 10s; a negative value, never; a positive value
	// under [MinHoldWarning] means MinHoldWarning.
	HoldWarning time.Duration

	// MCPServers are MCP servers the proxy offers the agent over ACP. Each
	// is declared in every session the client sets up, and served for every
	// connection the agent opens to it. See [MCPServer].
	MCPServers []*MCPServer
}

// MinHoldWarning is the shortest [Proxy.HoldWarning] a proxy keeps to:
// the connection's watcher wakes as often as that, and a nanosecond
// would keep it awake all the time a handler runs.
const MinHoldWarning = 10 * time.Millisecond

// holdWarning returns p.HoldWarning, or its default, or its floor.
func (p *Proxy) holdWarning() time.Duration {
	switch {
	case p.HoldWarning == 0:
		return 10 * time.Second
	case p.HoldWarning > 0 && p.HoldWarning < MinHoldWarning:
		return MinHoldWarning
	}
	return p.HoldWarning
}

// name returns the name the proxy goes by.
func (p *Proxy) name() string {
	if p.Name != "" {
		return p.Name
	}
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
}

// checkHandlers warns of each handler keyed so that it can never run. A
// mistaken key is not an error, since a proxy without the handler still
// works, but it fails silently: the message is forwarded unhandled.
func (p *Proxy) checkHandlers(log *slog.Logger) {
	for _, from := range [...]Side{Predecessor, Successor} {
		handlers := p.FromPredecessor
		if from == Successor {
			handlers = p.FromSuccessor
		}
		if len(handlers) == 0 {
			continue
		}
		for _, method := range slices.Sorted(maps.Keys(handlers)) {
			if why := neverHandled(from, method); why != "" {
				log.Warn("a handler that can never run: "+why, "method", method, "from", from)
			}
		}
	}
}

// neverHandled says why a handler for method from one side can never run,
// or returns "" if it can.
func neverHandled(from Side, method string) string {
	switch {
	case wire.IsSuccessor(method):
		return "envelopes are unwrapped, and the handler for what one carries is keyed by its method in FromSuccessor"
	case wire.ProxyInitDialect(method) != nil:
		return `the handler for "initialize" in FromPredecessor handles a proxy's initialize`
	case method == wire.MethodCancelRequest:
		return "the proxy cancels what a cancel names itself: a handler's context, or the request it relayed"
	case from == Predecessor && clientMethods[method]:
		return "only the agent side sends it: key it in FromSuccessor"
	case from == Successor && agentMethods[method]:
		return "only the client side sends it: key it in FromPredecessor"
	}
	if known := acpSpelling(method); known != "" {
		return fmt.Sprintf("ACP spells it %q", known)
	}
	return ""
}

// acpSpelling returns the ACP method that method misspells by case,
// underscores or surrounding space (session/requestPermission, as the
// TypeScript SDK names it, for session/request_permission), or "" if it
// misspells none. A peer sends only the exact name, so a handler keyed
// otherwise never runs.
func acpSpelling(method string) string {
	fold := func(s string) string {
		return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
	}
	if agentMethods[method] || clientMethods[method] || mcpMethods[method] {
		return ""
	}
	want := fold(method)
	for _, set := range [...]map[string]bool{agentMethods, clientMethods, mcpMethods} {
		for known := range set {
			if fold(known) == want {
				return known
			}
		}
	}
	return ""
}

// The ACP methods that only the client side calls, and those that only the
// agent side does.
var (
	agentMethods = setOf("initialize", "authenticate", "session/new", "session/load", "session/resume",
		"session/fork", "session/list", "session/prompt", "session/cancel", "session/set_mode",
		"session/set_model", "session/close", "session/delete")
	clientMethods = setOf("session/update", "session/request_permission", "fs/read_text_file", "fs/write_text_file",
		"terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")
	mcpMethods = setOf("mcp/connect", "mcp/message", "mcp/disconnect")
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (p *Proxy) handler(from Side, method string) Handler {
	if from == Successor {
		return p.FromSuccessor[method]
	}
	return p.FromPredecessor[method]
}

// Serve runs the proxy on one connection to its conductor, reading from in
// and writing to out (for a proxy process, [Stdin] and [Stdout]), until in
// ends or ctx is done. Serve closes out before it returns, and waits for
// every handler it started to return.
//
// Serve returns nil at the end of in, ctx.Err() if ctx is done first, and
// otherwise the error that stopped it, such as a failed write. When ctx is
// done Serve closes in, if in is an io.Closer, to interrupt a pending read,
// and out, to interrupt a pending write; if in is not a Closer, or closing
// does not interrupt the read or the write (as with a blocking file such
// as os.Stdin), Serve returns only once it does.
func (p *Proxy) Serve(ctx context.Context, in io.Reader, out io.WriteCloser) error {
	if p == nil {
		p = new(Proxy)
	}
	if err := checkMCPServers(p.MCPServers); err != nil {
		out.Close()
		return err
	}
	// What comes from the successor's side arrives in an envelope.
	ch := wire.NewLineChannel(in, out, p.MaxMessageBytes).AllowEnvelope()
	g, gctx := errgroup.WithContext(ctx)
	c := newConn(gctx, p)
	p.checkHandlers(c.log)
	c.out.try = wire.TryWriterOf(ch) // nil unless out can be written without blocking

	written := make(chan struct{})
	g.Go(func() error {
		defer close(written)
		return c.out.run(gctx, ch)
	})
	stopped := make(chan struct{})
	g.Go(func() error {
		defer close(stopped)
		err := c.read(gctx, ch)
		c.shutdown(err)
		return err
	})
	g.Go(func() error {
		select {
		case <-gctx.Done():
			c.stop(context.Cause(gctx))
			if in, ok := in.(io.Closer); ok {
				in.Close()
			}
		case <-stopped:
			// The rest is written as the conductor reads it, unless
			// gctx is done first.
			select {
			case <-gctx.Done():
			case <-written:
				return nil
			}
		}
		// Nothing more is written once gctx is done, but a write may be
		// blocked, the conductor not reading: closing out interrupts it,
		// as closing in does a read. ch.Close, below, would wait for it.
		out.Close()
		return nil
	})

	err := g.Wait()
	if cerr := ch.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("proxy: closing output: %w", cerr)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
