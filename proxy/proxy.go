package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
	FromSuccessor map[string]Handler

	// Logger receives reports of traffic the proxy had to drop or refuse,
	// of handlers that panicked, and of MCP servers that failed. Nil writes
	// warnings and errors as text to standard error, which a conductor logs
	// for each of its components (standard output carries only the
	// protocol); slog.New(slog.DiscardHandler) discards them.
	Logger *slog.Logger

	// MaxMessageBytes bounds one incoming message, as its sender wrote it:
	// a successor's message may arrive with an envelope's few bytes more
	// (wire.EnvelopeOverhead). Zero means 64 MiB, well above what the ACP
	// SDKs send.
	MaxMessageBytes int

	// MCPServers are MCP servers the proxy offers the agent over ACP. Each
	// is declared in every session the client sets up, and served for every
	// connection the agent opens to it. See [MCPServer].
	MCPServers []*MCPServer
}

// name returns the name the proxy goes by.
func (p *Proxy) name() string {
	if p.Name != "" {
		return p.Name
	}
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
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
// done Serve closes in, if in is an io.Closer, to interrupt a pending read;
// if in is not, or closing does not interrupt it (as with a blocking file
// such as os.Stdin), Serve returns only once that read does.
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
	c.out.try = wire.TryWriterOf(ch) // nil unless out can be written without blocking

	g.Go(func() error { return c.out.run(gctx, ch) })
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
			if in, ok := in.(io.Closer); ok {
				in.Close()
			}
		case <-stopped:
		}
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
