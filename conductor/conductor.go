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
)

// Run serves one client on in and out until the client closes in, ctx is
// done, or a component fails, and stops every component before it returns.
// It returns nil when the chain stopped cleanly and an error naming the
// component otherwise.
//
// If in is an io.Closer, Run closes it on the way out so that its reader
// unblocks; for os.Stdin that needs the descriptor in non-blocking mode.
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
	for i := range comps {
		comps[i].Name = componentName(comps[i])
	}

	r := &runner{
		cfg:      cfg,
		log:      log,
		stopping: make(chan struct{}),
		chain:    &chain{topo: topology{mode: cfg.Mode, proxies: len(cfg.Proxies)}, log: log, mcp: newMCPRoutes()},
	}
	client := newPeer("client", wire.NewLineChannel(in, nopCloser{out}, cfg.MaxMessageBytes), log)
	r.chain.peers = append(r.chain.peers, client)
	for _, c := range comps {
		p, err := startProcess(c)
		if err != nil {
			for _, started := range r.comps {
				started.proc.kill()
			}
			return startError(c, err)
		}
		pr := newPeer(c.Name, wire.NewLineChannel(p.stdout, p.stdin, cfg.MaxMessageBytes), log)
		pr.proc = p
		r.comps = append(r.comps, pr)
		r.chain.peers = append(r.chain.peers, pr)
		log.Debug("started component", zap.String("component", c.Name), zap.Int("pid", p.cmd.Process.Pid))
	}
	if cfg.Mode == ProxyMode {
		r.chain.peers = append(r.chain.peers, client) // the parent is also our successor
	}
	return r.run(ctx, client, in)
}

func (cfg *Config) check() error {
	for i, c := range cfg.Proxies {
		if c.Command == "" {
			return fmt.Errorf("proxy %d: no command", i)
		}
	}
	if cfg.Mode == AgentMode && cfg.Agent.Command == "" {
		return errors.New("agent mode needs an agent command")
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	return nil
}

// runner owns the goroutines of one Run. Shutdown has one path, stop, which
// every ending (client EOF, ctx, a component failing) goes through.
type runner struct {
	cfg   Config
	log   *zap.Logger
	chain *chain
	comps []*peer

	stopOnce sync.Once
	stopping chan struct{}
	failure  error // the first component failure, set before stopping closes
	failed   *peer // the component that failed, if one did
}

// stopError is the answer to requests cut off by the shutdown: the failure
// that caused it, if there was one, so the editor hears the real cause.
func (r *runner) stopError(p *peer) *wire.Error {
	if r.failed != nil {
		return goneError(r.failed, r.failure)
	}
	return goneError(p, errStopped)
}

func (r *runner) run(ctx context.Context, client *peer, in io.Reader) error {
	var g errgroup.Group
	never := make(chan struct{})

	g.Go(func() error {
		r.readLoop(client, 0)
		r.beginStop(nil, nil) // the client closed its input
		return nil
	})
	g.Go(func() error { return client.writeLoop(never) })

	var readers sync.WaitGroup
	for i, p := range r.comps {
		pos := i + 1
		readers.Add(1)
		g.Go(func() error { p.proc.wait(); return nil })
		g.Go(func() error { p.proc.pumpStderr(p.log); return nil })
		g.Go(func() error { return p.writeLoop(never) })
		g.Go(func() error {
			defer readers.Done()
			defer close(p.readDone)
			r.readLoop(p, pos)
			r.componentEnded(p)
			return nil
		})
	}

	g.Go(func() error {
		select {
		case <-ctx.Done():
			r.log.Info("stopping", zap.Error(context.Cause(ctx)))
			r.beginStop(nil, nil)
		case <-r.stopping:
		}
		r.stopAll()
		readers.Wait()
		// Whatever is still pending will never be answered now.
		for _, p := range r.comps {
			failCalls(p.fail(errStopped), r.stopError(p))
		}
		client.out.close()
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
		return nil
	})
	_ = g.Wait()
	return r.failure
}

var errStopped = errors.New("the conductor is shutting down")

// readLoop feeds every line from p into the chain until p's output ends.
func (r *runner) readLoop(p *peer, pos int) {
	for {
		line, err := p.ch.Recv()
		var big *wire.OversizeError
		switch {
		case errors.As(err, &big):
			r.chain.oversize(pos, big)
			continue
		case err != nil:
			if !errors.Is(err, io.EOF) {
				p.log.Debug("read ended", zap.Error(err))
			}
			return
		}
		r.chain.receive(pos, line)
	}
}

// componentEnded handles the end of a component's output: expected while
// stopping, a failure of the chain otherwise.
func (r *runner) componentEnded(p *peer) {
	select {
	case <-r.stopping:
		failCalls(p.fail(errStopped), r.stopError(p))
		return
	default:
	}
	// Its output is closed; give the exit status a moment to arrive so the
	// report can carry it.
	select {
	case <-p.proc.exited:
	case <-time.After(time.Second):
	}
	exit := p.proc.describeExit()
	cause := fmt.Errorf("component %q ended unexpectedly (%s)", p.name, exit.Status)
	r.log.Error("component failed", zap.String("component", p.name), zap.String("status", exit.Status), zap.Strings("stderr", exit.Stderr))
	failCalls(p.fail(cause), goneError(p, cause))
	r.beginStop(p, cause)
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
	for _, p := range r.comps {
		p.out.close()
		select {
		case <-p.readDone:
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
			p.proc.stop(r.cfg.GracePeriod)
		}()
	}
	wg.Wait()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
