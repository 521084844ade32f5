package conductor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// linkEnded handles the end of a component's output: expected once its
// input has been closed or after it was replaced, a failure otherwise
// (while the chain drains, too).
func (r *runner) linkEnded(p *peer, l *link) {
	if r.isStopped() {
		failCalls(p.fail(errStopped), r.stopError(p))
		return
	}
	if p.link.Load() != l {
		return // already restarted or bypassed
	}
	// Its output is closed; give its exit status and the rest of its stderr
	// a moment to arrive, so that the report carries them.
	// (One bound for both: a channel from time.After fires only once.)
	bound, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, c := range []chan struct{}{l.proc.exited, l.proc.drained} {
		select {
		case <-c:
		case <-bound.Done():
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
	limit, window := r.cfg.restartLimit(), r.cfg.restartWindow()
	if !p.allowRestart(time.Now(), limit, window) {
		return fmt.Errorf("restarted %d times within %v", limit, window)
	}
	proc, err := startProcess(p.comp, r.cfg.Supervisor)
	if err != nil {
		return startError(p.comp, err)
	}
	l := newLink(wire.NewLineChannel(proc.stdout, proc.stdin, r.cfg.MaxMessageBytes).AllowEnvelope(), proc, r.chain.hb, r.chain.flow)
	var replay *call
	if params := p.recordedInit(); params != nil {
		dl := p.getDialect()
		d := delivery{to: p.pos, method: dl.Initialize}
		if params, err = dl.InitializeParams(params); err != nil {
			return fmt.Errorf("replaying initialize: %w", err)
		}
		answered := make(chan struct{})
		var once sync.Once
		defer func() { r.wg.Go(func() { r.awaitReplay(p, l, answered) }) }()
		replay = &call{to: p, id: p.nextID.Add(1), method: d.method, onResponse: func(resp *wire.Message) bool {
			once.Do(func() { close(answered) })
			if resp.Error != nil {
				r.log.Error("restarted component failed to initialize", zap.String("component", p.name), zap.ByteString("error", resp.Error))
			}
			return true
		}}
		if r.chain.trace != nil {
			r.chain.traceSend(nil, p, wire.IntID(replay.id), d.method, params)
		}
		l.out.put(r.chain.encode(p, wire.IntID(replay.id), d, params)...)
	}
	old := p.link.Load()
	endMCP := r.chain.ownerGone(p.pos)
	failCalls(p.replace(l, replay), report)
	endMCP()
	r.wg.Go(func() { old.stop(r.cfg.grace()) })
	r.goLink(p, l)
	r.log.Warn("restarted component", zap.String("component", p.name), zap.Int("pid", proc.cmd.Process.Pid))
	return nil
}

// awaitReplay fails a restarted proxy, on link l, that does not answer
// its replayed initialize within the initialize timeout: everything sent to
// it waits behind that answer.
func (r *runner) awaitReplay(p *peer, l *link, answered <-chan struct{}) {
	timeout := r.cfg.initTimeout()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-answered:
	case <-r.stopping:
	case <-t.C:
		if p.link.Load() == l {
			r.componentFailed(p, fmt.Errorf("component %q did not answer the replayed initialize within %v", p.name, timeout))
		}
	}
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
	r.wg.Go(func() { old.stop(r.cfg.grace()) })
	r.log.Error("BYPASSED component: the chain now runs without it", zap.String("component", p.name))
	return true
}
