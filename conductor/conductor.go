package conductor

import (
	"context"
	"errors"
	"io"
	"sync"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// Run serves one client on in and out until the client closes in, ctx is
// done, or a component fails, and stops every component before it returns.
// It returns nil when the chain stopped cleanly and an error naming the
// component otherwise.
//
// If in is an io.Closer, Run closes it on the way out so that its reader
// unblocks; if out is one, Run closes it when the client has not read what
// is left for it within the grace period. For os.Stdin and os.Stdout that
// needs the descriptors in non-blocking mode: pass Stdin() and Stdout().
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	comps := append([]Component(nil), cfg.Proxies...)
	if cfg.Mode == AgentMode {
		comps = append(comps, cfg.Agent)
	}

	topo := &topology{mode: cfg.Mode, proxies: len(cfg.Proxies)}
	r := &runner{
		cfg:      cfg,
		log:      log,
		stopping: make(chan struct{}),
		cut:      make(chan struct{}),
		chain:    &chain{log: log, mcp: newMCPRoutes(), initTimeout: cfg.initTimeout(), hb: new(holdback), flow: newFlow(), trace: cfg.Trace},
	}
	r.chain.topo.Store(topo)
	r.chain.failed = r.componentFailed
	// The limit applies to messages as their senders wrote them: lines
	// from a component or a parent conductor may carry one in an envelope.
	clientCh := wire.NewLineChannel(in, nopCloser{out}, cfg.MaxMessageBytes)
	if cfg.Mode == ProxyMode {
		clientCh.AllowEnvelope()
	}
	client := newPeer(clientName, 0, newLink(clientCh, nil, r.chain.hb, r.chain.flow), log)
	r.out = out
	r.chain.peers = append(r.chain.peers, client)
	if cfg.Supervisor != "" {
		w, err := supervisor.New()
		if err != nil {
			return refuse(ctx, cfg, in, out, err, "")
		}
		if w != nil { // nil where there is none (not Unix)
			r.watch = w
			defer w.Close() // after every component has been reaped: see run
		}
	}
	for i, c := range comps {
		c.Name = componentName(c)
		p, err := startProcess(c, r.watch)
		if err != nil {
			for _, started := range r.comps {
				started.proc().kill()
			}
			return refuse(ctx, cfg, in, out, startError(c, err), c.Name)
		}
		pr := newPeer(c.Name, i+1, newLink(wire.NewLineChannel(p.stdout, p.stdin, cfg.MaxMessageBytes).AllowEnvelope(), p, r.chain.hb, r.chain.flow), log)
		pr.comp = c
		r.comps = append(r.comps, pr)
		r.chain.peers = append(r.chain.peers, pr)
		log.Debug("started component", zap.String("component", c.Name), zap.Int("pid", p.pid))
	}
	if cfg.Mode == ProxyMode {
		r.chain.peers = append(r.chain.peers, client) // the parent is also our successor
	} else {
		// The parent of a proxy-mode conductor bridges for the whole tree;
		// an agent-mode conductor bridges for its agent.
		b, t, err := newBridge(cfg, log, r.chain.mcp)
		if err != nil {
			for _, p := range r.comps {
				p.proc().kill()
			}
			return err
		}
		r.chain.bridge, r.bridge = b, t
	}
	for _, p := range r.chain.peers {
		p.trace = cfg.Trace
	}
	// The watchdog starts after the components, not to delay theirs, and
	// from a goroutine of its own, so that the client's initialize need
	// not wait for it either: its start returns only once the shell has
	// been executed, and with the components starting on every core that
	// took up to 9 ms now and then (make bench: startup). What it must
	// know of the components waits in its pipe. Should the conductor die
	// before it runs, the components still die of their parent-death
	// signal (on Linux); should it fail to start, the chain stops and the
	// client is told why.
	if r.watch != nil {
		r.wg.Go(func() {
			if err := r.watch.Launch(cfg.Supervisor); err != nil {
				r.log.Error("stopping: the chain's watchdog did not start", zap.Error(err))
				r.beginStop(nil, err)
			}
		})
	}
	if cfg.running != nil {
		cfg.running(r.chain)
	}
	return r.run(ctx, client, in)
}

// runner owns the goroutines of one Run, all in one WaitGroup. Shutdown has
// one path, the goroutine in run that waits for stopping, which every ending
// (client EOF, ctx, a component failing) reaches through beginStop.
type runner struct {
	cfg   Config
	log   *zap.Logger
	chain *chain
	comps []*peer
	wg    sync.WaitGroup
	out   io.Writer // the client's

	bridge *mcpbridge.Bridge // nil in proxy mode
	watch  *supervisor.Watch // the chain's watchdog; nil without Config.Supervisor

	mu      sync.Mutex // guards what follows, and stopped against restarts
	stopped bool       // the components are being stopped
	failure error      // the first component failure
	failed  *peer      // the component that failed, if one did
	told    error      // why the chain stops when no component failed: a signal, the client's input ending
	retired []*link    // the links of restarted and bypassed processes, being stopped (see retire)

	stopOnce sync.Once
	stopping chan struct{} // closed when shutdown begins
	cut      chan struct{} // closed when stopAll has waited for the components: see retire
}

func (r *runner) run(ctx context.Context, client *peer, in io.Reader) error {
	cl := client.link.Load()
	flushed := make(chan struct{})
	r.wg.Go(func() {
		r.chain.readLoop(client, cl)
		close(cl.readDone)
		// The client closed its input: it can answer nothing more.
		failCalls(client.fail(errClientGone), wire.Errorf(codeInternalError, "%s: %v", client.name, errClientGone))
		r.chain.ownerEnded(client.pos)
		r.tell(errInputEnded)
		r.beginStop(nil, nil)
	})
	r.wg.Go(func() {
		cl.writeLoop(client.log)
		close(flushed)
		select {
		case <-r.stopping:
		default:
			// A write failed before any stop: the client hears nothing
			// more, though its input may stay open.
			r.log.Warn("stopping: the client's output is closed; it can hear nothing more")
			r.beginStop(nil, nil)
		}
	})
	for _, p := range r.comps {
		r.goLink(p, p.link.Load())
	}
	if r.bridge != nil {
		accept := r.chain.serveBridged
		if hook := r.cfg.bridgeAccept; hook != nil {
			accept = func(ctx context.Context, c *mcpbridge.Conn) { hook(c); r.chain.serveBridged(ctx, c) }
		}
		r.wg.Go(func() {
			// Serve ends when the bridge is closed, after every bridged
			// connection's relay has returned.
			if err := r.bridge.Serve(context.Background(), accept); err != nil && !errors.Is(err, mcpbridge.ErrClosed) {
				r.log.Error("MCP bridge stopped", zap.Error(err))
			}
		})
	}
	r.wg.Go(func() {
		select {
		case <-ctx.Done():
			r.log.Info("stopping", zap.Error(context.Cause(ctx)))
			if cause := context.Cause(ctx); cause != context.Canceled {
				r.tell(cause) // a signal, say: the client hears it
			}
			r.beginStop(nil, nil)
		case <-r.stopping:
		}
		r.shutdown(ctx, client, flushed, in)
	})
	r.wg.Wait()
	for _, p := range r.chain.peers[:len(r.comps)+1] { // the client once, in proxy mode too
		p.logDropped()
	}
	_, err := r.cause()
	return err
}

var errClientGone = errors.New("closed its input")

// errInputEnded is why the chain stops when the client closes its input.
var errInputEnded = errors.New("the input from the client ended")

// goLink starts the goroutines that serve one link of a component.
func (r *runner) goLink(p *peer, l *link) {
	r.wg.Go(func() {
		l.proc.wait()
		l.outputEnded()
	})
	r.wg.Go(func() { l.proc.pumpStderr(p.log) })
	r.wg.Go(func() { l.writeLoop(p.log) })
	r.wg.Go(func() {
		defer close(l.readDone)
		r.chain.readLoop(p, l)
		close(l.proc.eof)
		r.linkEnded(p, l)
	})
}
