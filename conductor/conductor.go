package conductor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
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
	if err := cfg.check(); err != nil {
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
		chain:    &chain{log: log, mcp: newMCPRoutes(), initTimeout: cfg.InitTimeout, hb: new(holdback)},
	}
	r.chain.topo.Store(topo)
	r.chain.failed = r.componentFailed
	client := newPeer("client", 0, newLink(wire.NewLineChannel(in, nopCloser{out}, cfg.MaxMessageBytes), nil, r.chain.hb), log)
	r.out = out
	r.chain.peers = append(r.chain.peers, client)
	for i, c := range comps {
		c.Name = componentName(c)
		p, err := startProcess(c, cfg.Supervisor)
		if err != nil {
			for _, started := range r.comps {
				started.proc().kill()
			}
			return refuse(ctx, cfg, in, out, startError(c, err), c.Name)
		}
		pr := newPeer(c.Name, i+1, newLink(wire.NewLineChannel(p.stdout, p.stdin, cfg.MaxMessageBytes), p, r.chain.hb), log)
		pr.comp = c
		r.comps = append(r.comps, pr)
		r.chain.peers = append(r.chain.peers, pr)
		log.Debug("started component", zap.String("component", c.Name), zap.Int("pid", p.cmd.Process.Pid))
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
	return r.run(ctx, client, in)
}

func (cfg *Config) check() error {
	for i, c := range cfg.Proxies {
		if c.Command == "" {
			return fmt.Errorf("proxy %d: no command", i)
		}
	}
	if cfg.Mode == AgentMode {
		if cfg.Agent.Command == "" {
			return errors.New("agent mode needs an agent command")
		}
		if p := cfg.Agent.OnFailure; p != "" && p != PolicyFail {
			return fmt.Errorf("agent %q: on_failure %q: only a proxy can be restarted or bypassed", componentName(cfg.Agent), p)
		}
	}
	for _, c := range cfg.Proxies {
		switch c.OnFailure {
		case "", PolicyFail, PolicyRestart, PolicyBypass:
		default:
			return fmt.Errorf("proxy %q: unknown on_failure policy %q", componentName(c), c.OnFailure)
		}
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	if cfg.RestartLimit <= 0 {
		cfg.RestartLimit = DefaultRestartLimit
	}
	if cfg.RestartWindow <= 0 {
		cfg.RestartWindow = DefaultRestartWindow
	}
	return nil
}

// runner owns the goroutines of one Run, all in one errgroup. Shutdown has
// one path, the goroutine in run that waits for stopping, which every ending
// (client EOF, ctx, a component failing) reaches through beginStop.
type runner struct {
	cfg   Config
	log   *zap.Logger
	chain *chain
	comps []*peer
	g     errgroup.Group
	out   io.Writer // the client's

	bridge *mcpbridge.Bridge // nil in proxy mode

	mu      sync.Mutex // guards stopped against restarts
	stopped bool

	stopOnce sync.Once
	stopping chan struct{}
	failure  error // the first component failure, set before stopping closes
	failed   *peer // the component that failed, if one did
}

func (r *runner) run(ctx context.Context, client *peer, in io.Reader) error {
	cl := client.link.Load()
	flushed := make(chan struct{})
	r.g.Go(func() error {
		r.readLoop(client, cl)
		r.beginStop(nil, nil) // the client closed its input
		return nil
	})
	r.g.Go(func() error { cl.writeLoop(client.log); close(flushed); return nil })
	for _, p := range r.comps {
		r.goLink(p, p.link.Load())
	}
	if r.bridge != nil {
		r.g.Go(func() error {
			// Serve ends when the bridge is closed, after every bridged
			// connection's relay has returned.
			if err := r.bridge.Serve(context.Background(), r.chain.serveBridged); err != nil && !errors.Is(err, mcpbridge.ErrClosed) {
				r.log.Error("MCP bridge stopped", zap.Error(err))
			}
			return nil
		})
	}

	r.g.Go(func() error {
		select {
		case <-ctx.Done():
			r.log.Info("stopping", zap.Error(context.Cause(ctx)))
			r.beginStop(nil, nil)
		case <-r.stopping:
		}
		r.stopAll()
		if r.bridge != nil {
			r.bridge.Close()
		}
		// Whatever is still pending will never be answered now.
		for _, p := range r.comps {
			failCalls(p.fail(errStopped), r.stopError(p))
		}
		cl.out.close()
		select {
		case <-flushed:
		case <-time.After(r.cfg.GracePeriod):
			// The client stopped reading. Closing out (if Run may) is the
			// only way to unblock the write; without it Run would hang.
			r.log.Warn("the client is not reading; dropping what it has not read")
			if c, ok := r.out.(io.Closer); ok {
				c.Close()
			}
		}
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
		return nil
	})
	_ = r.g.Wait()
	return r.failure
}

// goLink starts the goroutines that serve one link of a component.
func (r *runner) goLink(p *peer, l *link) {
	r.g.Go(func() error { l.proc.wait(); return nil })
	r.g.Go(func() error { l.proc.pumpStderr(p.log); return nil })
	r.g.Go(func() error { l.writeLoop(p.log); return nil })
	r.g.Go(func() error {
		defer close(l.readDone)
		r.readLoop(p, l)
		r.linkEnded(p, l)
		return nil
	})
}

var errStopped = errors.New("the conductor is shutting down")

// stopError is the answer to requests cut off by the shutdown: the failure
// that caused it, if there was one, so the editor hears the real cause.
func (r *runner) stopError(p *peer) *wire.Error {
	if r.failed != nil {
		return goneError(r.failed, r.failure)
	}
	return goneError(p, errStopped)
}

// readLoop feeds every line from l into the chain until l's input ends.
// While more lines are buffered it holds back the chain's writes, and it
// releases them before it reads again (see holdback).
func (r *runner) readLoop(p *peer, l *link) {
	more, _ := l.ch.(interface{ More() bool })
	hb, holding := r.chain.hb, false
	for {
		line, err := l.ch.Recv()
		burst := more != nil && err == nil && more.More()
		if burst && !holding {
			hb.hold()
		}
		ok := r.handle(p, line, err)
		if holding && !burst { // an error ends any burst
			hb.release()
		}
		holding = burst
		if !ok {
			return
		}
	}
}

// handle relays one line read from p, or deals with the error reading it;
// it reports false when p's input has ended.
func (r *runner) handle(p *peer, line []byte, err error) bool {
	var big *wire.OversizeError
	switch {
	case errors.As(err, &big):
		r.chain.oversize(p, big)
	case err != nil:
		if !errors.Is(err, io.EOF) {
			p.log.Debug("read ended", zap.Error(err))
		}
		return false
	default:
		r.chain.receive(p, line)
	}
	return true
}

// linkEnded handles the end of a component's output: expected while
// stopping or after the component was replaced, a failure otherwise.
func (r *runner) linkEnded(p *peer, l *link) {
	select {
	case <-r.stopping:
		failCalls(p.fail(errStopped), r.stopError(p))
		return
	default:
	}
	if p.link.Load() != l {
		return // already restarted or bypassed
	}
	// Its output is closed; give its exit status and the rest of its stderr
	// a moment to arrive, so that the report carries them.
	bound := time.After(time.Second)
	for _, c := range []chan struct{}{l.proc.exited, l.proc.drained} {
		select {
		case <-c:
		case <-bound:
		}
	}
	r.componentFailed(p, fmt.Errorf("component %q ended unexpectedly (%s)", p.name, l.proc.describeExit().Status))
}

// componentFailed applies p's failure policy: everything pending on it is
// answered at once, then it is restarted, bypassed, or the chain stops.
func (r *runner) componentFailed(p *peer, cause error) {
	exit := p.proc().describeExit()
	r.log.Error("component failed", zap.String("component", p.name), zap.Error(cause),
		zap.String("status", exit.Status), zap.Strings("stderr", exit.Stderr))
	report := goneError(p, cause)
	if p.comp.OnFailure == PolicyRestart {
		err := r.restart(p, report)
		if err == nil {
			return
		}
		r.log.Error("not restarting", zap.String("component", p.name), zap.Error(err))
	}
	if p.comp.OnFailure == PolicyBypass && r.bypass(p) {
		endMCP := r.chain.ownerGone(p.pos)
		failCalls(p.fail(cause), report)
		endMCP()
		return
	}
	// The failure is recorded before anyone hears of it, so that a client
	// that hangs up on the error cannot make this a clean end.
	r.beginStop(p, cause)
	failCalls(p.fail(cause), report)
}

// restart replaces a failed proxy's process and replays its initialization:
// proxy/initialize with the params it first got goes first on the new link,
// and when the proxy forwards initialize, the conductor answers as its
// successor did the first time. Requests that arrive meanwhile queue behind
// the replay; those that were pending on the old process are answered with
// report.
func (r *runner) restart(p *peer, report *wire.Error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errStopped
	}
	if !p.allowRestart(time.Now(), r.cfg.RestartLimit, r.cfg.RestartWindow) {
		return fmt.Errorf("restarted %d times within %v", r.cfg.RestartLimit, r.cfg.RestartWindow)
	}
	proc, err := startProcess(p.comp, r.cfg.Supervisor)
	if err != nil {
		return startError(p.comp, err)
	}
	l := newLink(wire.NewLineChannel(proc.stdout, proc.stdin, r.cfg.MaxMessageBytes), proc, r.chain.hb)
	var replay *call
	if params := p.recordedInit(); params != nil {
		d := delivery{to: p.pos, method: p.getDialect().initialize()}
		replay = &call{to: p, id: p.nextID.Add(1), method: d.method, onResponse: func(resp *wire.Message) bool {
			if resp.Error != nil {
				r.log.Error("restarted component failed to initialize", zap.String("component", p.name), zap.ByteString("error", resp.Error))
			}
			return true
		}}
		l.out.put(r.chain.encode(p, wire.IntID(replay.id), d, params)...)
	}
	old := p.link.Load()
	endMCP := r.chain.ownerGone(p.pos)
	failCalls(p.replace(l, replay), report)
	endMCP()
	r.g.Go(func() error { old.out.close(); old.proc.stop(r.cfg.GracePeriod); return nil })
	r.goLink(p, l)
	r.log.Warn("restarted component", zap.String("component", p.name), zap.Int("pid", proc.cmd.Process.Pid))
	return nil
}

// bypass takes a failed proxy out of the chain, so that its predecessor now
// talks to its successor.
func (r *runner) bypass(p *peer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.chain.bypass(p.pos)
	old := p.link.Load()
	r.g.Go(func() error { old.out.close(); old.proc.stop(r.cfg.GracePeriod); return nil })
	r.log.Error("BYPASSED component: the chain now runs without it", zap.String("component", p.name))
	return true
}

// beginStop starts the one shutdown path; the first caller's cause is kept.
func (r *runner) beginStop(failed *peer, cause error) {
	r.stopOnce.Do(func() {
		r.failed, r.failure = failed, cause
		close(r.stopping)
	})
}

// stopAll stops every component. Input is closed along the chain, nearest
// the client first, and each component gets up to the grace period to finish
// and close its output before the next one's input closes: what a proxy
// forwards on its way out still reaches its successor. Then each gets the
// grace period before its process group is signalled. It returns when all
// have been reaped.
func (r *runner) stopAll() {
	r.mu.Lock()
	r.stopped = true // no restart from here on
	r.mu.Unlock()
	for _, p := range r.comps {
		l := p.link.Load()
		l.out.close()
		select {
		case <-l.readDone:
			p.log.Debug("component closed its output")
		case <-time.After(r.cfg.GracePeriod):
			p.log.Warn("component still writing after its input closed", zap.Duration("grace", r.cfg.GracePeriod))
		}
	}
	var wg sync.WaitGroup
	for _, p := range r.comps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.proc().stop(r.cfg.GracePeriod)
		}()
	}
	wg.Wait()
	for _, p := range r.comps {
		<-p.link.Load().readDone
	}
}

// refuse answers the client's first request with cause, a chain that could
// not start, so that an editor shows why rather than a closed pipe; then Run
// returns cause. It gives up after the grace period if no request comes.
func refuse(ctx context.Context, cfg Config, in io.Reader, out io.Writer, cause error, component string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.GracePeriod)
	defer cancel()
	ch := wire.NewLineChannel(in, nopCloser{out}, cfg.MaxMessageBytes)
	first := make(chan *wire.Message, 1)
	go func() { // owned: refuse waits for first to close
		defer close(first)
		for {
			line, err := ch.Recv()
			if err != nil {
				return
			}
			if m, err := wire.Parse(line); err == nil && m.IsRequest() {
				first <- m
				return
			}
		}
	}()
	select {
	case m, ok := <-first:
		if ok {
			e := wire.Errorf(codeInternalError, "%v", cause).WithData(exitError{Component: component, Status: "did not start"})
			_ = ch.Send(wire.ErrorResponse(m.ID, e).Bytes())
		}
	case <-ctx.Done():
	}
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
	for range first {
		// The reader has not seen the end of in yet. As in run, a reader
		// that Run cannot close is waited for: nothing of Run outlives it.
	}
	return cause
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Unwrap lets the channel find the file behind, to write to it directly.
func (n nopCloser) Unwrap() io.Writer { return n.Writer }
