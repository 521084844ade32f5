package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Options configure a Bridge.
type Options struct {
	// Executable is the acp-conductor binary that stdio declarations run as
	// the shim. The default is the running executable.
	Executable string
	// Logger receives refused connections and transport failures. The
	// default discards them.
	Logger *zap.Logger
	// HTTP allows the streamable HTTP transport, on a loopback port that
	// is opened by the first call to Bridge.HTTP.
	HTTP bool
	// HTTPIdleTimeout ends an HTTP session that has had no request in
	// progress, GET stream included, for this long. Zero selects
	// DefaultHTTPIdleTimeout; negative keeps sessions until DELETE or Close.
	HTTPIdleTimeout time.Duration
	// MaxMessageBytes bounds one message from the agent; <= 0 selects
	// wire.DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// DefaultHTTPIdleTimeout is long because a client whose session is ended must
// initialize again, and not every client does that well.
const DefaultHTTPIdleTimeout = 30 * time.Minute

// A Bridge serves the agent-side transports of bridged MCP servers for one
// conductor.
type Bridge struct {
	log      *zap.Logger
	exe      string
	maxBytes int
	greeting time.Duration // handshakeTimeout when made
	dir      string        // private directory holding the socket
	socket   string
	unix     *net.UnixListener
	httpOK   bool          // Options.HTTP
	httpIdle time.Duration // Options.HTTPIdleTimeout, defaulted
	decls    registry
	refusals *refusals
	greeters chan struct{} // a slot per shim connection still handshaking

	stop     chan struct{} // closed by Close
	stopOnce sync.Once

	mu       sync.Mutex
	serving  bool
	stopping bool
	group    *errgroup.Group // Serve's, while it runs
	ctx      context.Context // given to accept
	accept   func(context.Context, *Conn)
	open     map[io.Closer]struct{} // Conns and shim sockets still handshaking
	http     *httpTransport         // once the first HTTP declaration is made
}

// New creates the bridge's private socket directory and starts listening
// on its socket, so that declarations can be handed out at once;
// connections wait until Serve accepts them.
func New(opts Options) (*Bridge, error) {
	b := &Bridge{
		log:      opts.Logger,
		exe:      opts.Executable,
		maxBytes: opts.MaxMessageBytes,
		greeting: handshakeTimeout,
		httpOK:   opts.HTTP,
		httpIdle: opts.HTTPIdleTimeout,
		greeters: make(chan struct{}, maxHandshakes),
		stop:     make(chan struct{}),
		open:     make(map[io.Closer]struct{}),
	}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	b.refusals = newRefusals(b.log)
	if b.httpIdle == 0 {
		b.httpIdle = DefaultHTTPIdleTimeout
	}
	if b.maxBytes <= 0 {
		b.maxBytes = wire.DefaultMaxMessageBytes
	}
	if b.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("mcpbridge: finding the shim executable: %w", err)
		}
		b.exe = exe
	}
	sweep(b.log)
	dir, socket, err := socketDir()
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: %w", err)
	}
	b.dir, b.socket = dir, socket
	b.unix, err = net.ListenUnix("unix", &net.UnixAddr{Name: b.socket, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mcpbridge: %w", err)
	}
	return b, nil
}

// httpTransport returns the HTTP transport, opening its listener the first
// time, and serving it at once if Serve runs.
func (b *Bridge) httpTransport() (*httpTransport, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.http != nil:
		return b.http, nil
	case !b.httpOK:
		return nil, ErrNoHTTP
	case b.closed() || b.stopping:
		return nil, ErrClosed
	}
	t, err := newHTTPTransport(b, b.httpIdle)
	if err != nil {
		return nil, err
	}
	b.http = t
	if b.group != nil {
		b.serveHTTPLocked()
	}
	b.log.Debug("MCP HTTP bridge listening", zap.String("address", t.host))
	return t, nil
}

// serveHTTPLocked starts serving the HTTP transport in Serve's group; b.mu
// is held and Serve is not stopping, so the group still runs.
func (b *Bridge) serveHTTPLocked() {
	t, ctx := b.http, b.ctx
	b.group.Go(func() error { return t.serve() })
	b.group.Go(func() error { t.reapIdle(ctx); return nil })
}

// Serve accepts connections until ctx is done or Close is called, calling
// accept for each in a goroutine of its own. The Conn is closed when accept
// returns, and accept should return once Recv fails: Serve closes every
// Conn when it stops, and returns only after every accept has returned. It
// returns nil when stopped, and an error if a listener fails.
func (b *Bridge) Serve(ctx context.Context, accept func(ctx context.Context, c *Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)

	b.mu.Lock()
	switch {
	case b.closed():
		b.mu.Unlock()
		return ErrClosed
	case b.serving:
		b.mu.Unlock()
		return errors.New("mcpbridge: Serve called twice")
	}
	b.serving, b.group, b.ctx, b.accept = true, g, ctx, accept
	if b.http != nil {
		b.serveHTTPLocked()
	}
	b.mu.Unlock()

	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-b.stop:
			cancel()
		}
		b.shutdown()
		return nil
	})
	g.Go(func() error { return b.serveSocket(ctx) })
	g.Go(func() error { b.refusals.run(ctx); return nil })
	return g.Wait()
}

// shutdown stops accepting and closes everything open, so that every
// goroutine of Serve's can finish.
func (b *Bridge) shutdown() {
	b.mu.Lock()
	b.stopping = true
	open := make([]io.Closer, 0, len(b.open))
	for c := range b.open {
		open = append(open, c)
	}
	t := b.http
	b.mu.Unlock()

	b.unix.Close()
	for _, c := range open {
		c.Close()
	}
	if t != nil {
		t.shutdown()
	}
}

// Close stops Serve, if it runs, and removes the socket directory. Serve
// still waits for its connections before it returns.
func (b *Bridge) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	b.unix.Close() // for a bridge that never served
	b.mu.Lock()
	t := b.http
	b.mu.Unlock()
	if t != nil {
		t.ln.Close()
	}
	if err := os.RemoveAll(b.dir); err != nil {
		return fmt.Errorf("mcpbridge: %w", err)
	}
	return nil
}

func (b *Bridge) closed() bool {
	select {
	case <-b.stop:
		return true
	default:
		return false
	}
}

// track records c as open, to be closed if Serve stops; it reports false,
// having closed c, if Serve is already stopping.
func (b *Bridge) track(c io.Closer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping {
		c.Close()
		return false
	}
	b.open[c] = struct{}{}
	if tracked != nil {
		tracked(len(b.open))
	}
	return true
}

// tracked, if set (by tests, before a bridge starts), is called with the
// number of connections open or handshaking each time track adds one.
var tracked func(open int)

// adopt replaces old with c among the open connections, as a shim socket
// becomes a Conn; it reports false, having closed c, if Serve is stopping.
func (b *Bridge) adopt(old io.Closer, c *Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, old)
	if b.stopping {
		c.Close()
		return false
	}
	b.open[c] = struct{}{}
	return true
}

func (b *Bridge) untrack(c io.Closer) {
	b.mu.Lock()
	delete(b.open, c)
	b.mu.Unlock()
}

// run calls accept for c on the calling goroutine, which must belong to
// Serve's group, and closes c afterwards.
func (b *Bridge) run(c *Conn) {
	defer b.untrack(c)
	defer c.Close()
	b.log.Debug("mcp connection", zap.String("server", c.ServerID), zap.String("transport", c.Transport))
	b.accept(b.ctx, c)
}

// spawn tracks c and runs it on a new goroutine of Serve's group. It reports
// false, having closed c, if Serve is stopping.
func (b *Bridge) spawn(c *Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping || b.group == nil {
		c.Close()
		return false
	}
	b.open[c] = struct{}{}
	// Safe even while Serve waits: stopping is false under b.mu, so the
	// goroutine that will call shutdown is still in the group.
	b.group.Go(func() error { b.run(c); return nil })
	return true
}
