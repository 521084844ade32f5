package conductor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
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
		// It is on its way out, and its exit status is near: an answer
		// made before Wait returns would say it is still running.
		if calls := p.fail(errStopped); len(calls) > 0 {
			l.proc.awaitReport()
			failCalls(calls, r.stopError(p))
		}
		if p.link.Load() == l {
			r.chain.ownerEnded(p.pos)
		}
		return
	}
	if p.link.Load() != l {
		return // already restarted or bypassed
	}
	// Its output is closed; give its exit status and the rest of its stderr
	// a moment to arrive, so that the report carries them.
	l.proc.awaitReport()
	r.componentFailed(p, endedError(p.name, l.proc.describeExit()))
}

// componentFailed applies p's failure policy: everything pending on it is
// answered at once, then it is restarted, bypassed, or the chain stops.
// An initialize pending on a proxy restarted or bypassed is the exception
// (see settle).
func (r *runner) componentFailed(p *peer, cause error) {
	exit := p.proc().describeExit()
	r.log.Error("component failed", zap.String("component", p.name), zap.Error(cause),
		zap.String("status", exit.Status), zap.Strings("stderr", exit.Stderr))
	report := goneError(p, cause)
	var why error // why the policy did not keep the chain going
	switch p.comp.OnFailure {
	case PolicyRestart:
		if why = r.restart(p, report); why == nil {
			return
		}
		r.log.Error("not restarting", zap.String("component", p.name), zap.Error(why))
		why = fmt.Errorf("not restarted: %w", why)
	case PolicyBypass:
		if r.bypass(p) {
			endMCP := r.chain.ownerGone(p.pos, "bypassed")
			calls, cancelled, orphaned := p.failBypassed(cause)
			for _, cl := range cancelled {
				abandon(cl, errCancelled) // its cancel went to p, with it
			}
			if r.cfg.bypassHold != nil {
				r.cfg.bypassHold()
			}
			r.settle(p, calls, report, afterFailure{bypassed: true})
			r.cancelOrphaned(orphaned)
			endMCP()
			return
		}
		// Only when the components began to stop (stopAll) after linkEnded
		// or the initialize timer saw the chain running: while it drains,
		// a proxy is bypassed. The client's requests are answered by then
		// (abandonAll), so what this fails is a proxy's, whose input is
		// closing (TestInitializeNotBypassedWhileStopping holds the
		// initialize timer's failure until then).
		why = fmt.Errorf("not bypassed: %w", errStopped)
	}
	// The failure is recorded before anyone hears of it, so that a client
	// that hangs up on the error cannot make this a clean end.
	r.beginStop(p, cause)
	r.settle(p, p.fail(cause), report, afterFailure{why: why})
	r.chain.ownerEnded(p.pos)
}

// afterFailure is what p's failure policy made of a failed component.
type afterFailure struct {
	bypassed bool
	why      error // not restarted nor bypassed: why the policy, if any, did not apply
}

// settle answers the calls pending on p, a component that failed, once its
// policy has run (how): with report, as they may have been half done. It
// decides what becomes of an initialize among them, which the conductor
// may send again whatever p did with it: bypassed, it goes on to p's
// successor, as route says now; otherwise it fails too. Where the policy
// did not save p, every answer says why. Those sent again go in the order p was sent
// them. (Restarted, p.replace has each wait for the replay of its own
// params, which follows the one that restores p if they differ: see
// replayInit. Only those of a proxy with nothing to replay come here.)
func (r *runner) settle(p *peer, calls []*call, report *wire.Error, how afterFailure) {
	inits := calls[:0:0]
	rest := calls[:0]
	for _, cl := range calls {
		if cl.from != nil && wire.IsInitialize(cl.method) {
			inits = append(inits, cl)
		} else {
			rest = append(rest, cl)
		}
	}
	if how.why != nil {
		// The chain stops rather than go on without p: every caller is
		// told why, not only an initialize's.
		e := *report
		e.Message += "; " + how.why.Error()
		report = &e
	}
	failCalls(rest, report)
	if len(inits) == 0 {
		return
	}
	slices.SortFunc(inits, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	if how.bypassed {
		for _, cl := range inits {
			r.chain.resendInitialize(cl, report)
		}
		return
	}
	failCalls(inits, report)
}

// restart replaces a failed proxy's process and replays its initialization:
// proxy/initialize with the params it first took goes first on the new link,
// and when the proxy forwards initialize, the conductor answers as its
// successor answered the same params (see takeReinit). Those pending on the old process are
// answered with report, but for an initialize, which gets the answer to a
// replay of its own params (see p.replace): the one that restores the
// proxy, or one sent after it, whose forwarded initialize the successor
// answers afresh unless it answered the same params before; or,
// if its caller cancelled it, -32800 at once.
//
// The new process starts after a back-off (see backoff), but its link is
// installed at once, with the old process still behind it: requests that
// arrive during the wait register and queue on it as they would while the
// process starts, behind the replay, under the same flow control as any
// other queue, and they go on only once every replay is answered
// (outbox.hold; see sendReplay). startAfter starts the process, or gives
// up at shutdown.
func (r *runner) restart(p *peer, report *wire.Error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errStopped
	}
	now := time.Now()
	limit, window := r.cfg.restartLimit(), r.cfg.restartWindow()
	earlier, ok := p.allowRestart(now, limit, window)
	if !ok {
		return fmt.Errorf("restarted %d times within %v", limit, window)
	}
	old := p.link.Load()
	next := &link{out: newOutbox(r.chain.hb, r.chain.flow), proc: old.proc, readDone: closedChan}
	rp, answered, err := r.replayInit(p, next)
	if err != nil {
		return err
	}
	first, most := r.cfg.restartBackoff()
	delay := backoff(earlier, first, most)
	endMCP := r.chain.ownerGone(p.pos, "restarted")
	// What replace takes off cannot be lost to the shutdown's drain: the
	// client does not look idle until failCalls has queued its answer
	// (call.take), and its output closes only after stopAll, which takes
	// r.mu first. The orphaned are p's own requests, which no one awaits
	// any more.
	unanswered, cancelled, orphaned := p.replace(next, rp)
	r.settle(p, unanswered, report, afterFailure{})
	for _, cl := range cancelled {
		abandon(cl, errCancelled) // its cancel went to the old process, with it
	}
	r.cancelOrphaned(orphaned)
	endMCP()
	r.retire(old)
	r.log.Warn("restarting component", zap.String("component", p.name), zap.Duration("backoff", delay))
	r.wg.Go(func() { r.startAfter(delay, p, next, rp, answered) })
	return nil
}

// cancelOrphaned cancels the requests a failed proxy made of its
// neighbours: nobody waits for them now, so their peers may stop working
// on them. Their late answers are dropped (call.take).
func (r *runner) cancelOrphaned(orphaned []*call) {
	for _, cl := range orphaned {
		r.chain.relay(nil, cl.to, nil, delivery{method: cancelMethod(cl.to)}, cancelParams(cl.id))
	}
}

// retire stops old, the link of a component restarted or bypassed, with
// r.mu held. Its process gets the grace period to exit once its input
// closes, but no longer than the components get at shutdown: stopAll waits
// for it with them, then closes cut and signals it with them, naming it
// in the outcome as the component's replaced process.
// Otherwise Run, which waits for this stop, could outlast the shutdown's
// deadline, and a second signal, by a grace period of the process's own.
func (r *runner) retire(old *link) {
	r.retired = slices.DeleteFunc(r.retired, func(l *link) bool { return l.proc.hasExited() })
	r.retired = append(r.retired, old)
	r.wg.Go(func() { old.stop(r.cfg.grace(), r.cut, r.log) })
}

// closedChan is the readDone of a link that has no reader.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// replayInit queues on l the proxy/initialize p is restored with (see
// recordedInit), and returns the replay that awaits its answer and a
// channel closed when it comes; nil if p was never sent one.
func (r *runner) replayInit(p *peer, l *link) (*replay, <-chan struct{}, error) {
	params := p.recordedInit()
	if params == nil {
		return nil, nil, nil
	}
	rp := &replay{params: params, restores: true}
	cl, line, answered, err := r.replayCall(p, rp)
	if err != nil {
		return nil, nil, fmt.Errorf("replaying initialize: %w", err)
	}
	rp.call = cl
	if r.chain.trace != nil {
		// Recorded as the process that takes it starts (startPending):
		// the back-off comes first, and the start may never come.
		cl.notSent(nil)
		rp.record = func() {
			if cl.traceMove(traceHeld, traceSent) {
				r.traceReplay(p, cl, rp.params)
			}
		}
	}
	l.out.put(line.segments()...)
	// What queues for p meanwhile waits for the answers to this replay
	// and to those after it (sendReplay opens it): a proxy may take
	// anything else it is sent first for such an answer, and fail; and
	// while a replay is pending, an initialize the proxy passes on takes
	// the successor's recorded answer (takeReinit), meant for a replay,
	// not for a client's initialize.
	l.out.hold()
	return rp, answered, nil
}

// replayCall returns the call that sends rp, whose answer goes to rp's
// waiters and has the replay after it sent, its line, and a channel closed
// when its answer comes.
func (r *runner) replayCall(p *peer, rp *replay) (*call, encoded, <-chan struct{}, error) {
	answered := make(chan struct{})
	cl, line, err := r.replayCallIn(p, rp, answered, new(sync.Once))
	return cl, line, answered, err
}

// replayCallIn is replayCall in p's dialect now, closing answered (once)
// when the answer comes: a retry in the next dialect keeps the first's.
func (r *runner) replayCallIn(p *peer, rp *replay, answered chan struct{}, once *sync.Once) (*call, encoded, error) {
	dl := p.getDialect()
	d := delivery{to: p.pos, method: dl.Initialize}
	params, err := dl.InitializeParams(rp.params)
	if err != nil {
		return nil, encoded{}, err
	}
	cl := &call{to: p, id: p.nextID.Add(1), method: d.method}
	cl.onResponse = func(resp *wire.Message) bool {
		if resp.Error != nil && rp.restores && r.retryReplay(p, rp, resp, answered, once) {
			return true
		}
		once.Do(func() { close(answered) })
		if resp.Error == nil {
			p.rememberInit(rp.params) // taken: the next restart replays them first
		}
		select {
		case <-r.stopping: // failed by the shutdown, not by the proxy
		default:
			if resp.Error != nil {
				r.log.Error("restarted component failed to initialize", zap.String("component", p.name), zap.ByteString("error", resp.Error))
			}
		}
		// The initialize requests the old process left unanswered wait for
		// this answer, as if the old process had given it.
		waiters, next, out := p.replayAnswered(rp)
		if out != nil && rp.restores && resp.Error != nil {
			// Not restored, so what queued for it cannot be served:
			// its policy applies, and answers that, saying why.
			cause := named(p.name, fmt.Errorf("component %q refused the replayed initialize: %s", p.name, errorMessage(resp.Error)))
			r.wg.Go(func() { r.componentFailed(p, cause) })
			out = nil // never opened: what it holds fails with p
			// Nor is the next replay sent to this process, which is being
			// failed: it would take those params for its first
			// initialize. It stays in p's replays, and its waiters go with
			// p's calls as its policy says (a restart replays them again).
			next = nil
		}
		for _, w := range waiters {
			answerWith(w, resp)
		}
		r.sendReplay(p, next, out)
		return true
	}
	return cl, r.chain.encode(p, wire.IntID(cl.id), d, params), nil
}

// retryReplay sends rp, the replay that restores p, again in the next
// dialect if p refused it as an unknown method, as retryInitialize does
// for a caller's initialize (the restarted process may be another
// program), and reports whether it did. The retry goes ahead of what
// waits for p's initialize (outbox.hold), which it is part of.
func (r *runner) retryReplay(p *peer, rp *replay, resp *wire.Message, answered chan struct{}, once *sync.Once) bool {
	if errorCode(resp.Error) != codeMethodNotFound || p.passedInit.Load() {
		return false
	}
	next := p.getDialect().Next()
	if next == nil || !p.replayCurrent(rp) {
		return false
	}
	if _, err := next.InitializeParams(rp.params); err != nil {
		return false
	}
	refused := p.getDialect().Initialize
	p.setDialect(next)
	cl, line, err := r.replayCallIn(p, rp, answered, once)
	if err != nil || !p.sendingReplay(rp, cl) {
		return false
	}
	p.log.Info("restarted proxy refused its replayed initialize; retrying in the next dialect",
		zap.String("refused", refused), zap.String("dialect", next.Name))
	r.traceReplay(p, cl, rp.params)
	p.send(line.segments()...)
	return true
}

// traceReplay records the conductor's replay cl, of params, in the trace.
func (r *runner) traceReplay(p *peer, cl *call, params json.RawMessage) {
	if r.chain.trace != nil {
		params, _ = p.getDialect().InitializeParams(params)
		r.chain.traceSend(nil, p, wire.IntID(cl.id), cl.method, params)
	}
}

// sendReplay sends rp, a replay of params other than those that restored
// p, once the replay before it is answered: one at a time, so that the
// successor's recorded answer goes to the initialize that restores p,
// whatever order p would pass several on in. Each is bounded by the
// initialize timeout from when it goes (see awaitReplay): the chain's own
// timer stops at the first answer the client gets. With none left to
// send, it opens out, the outbox of p's restored link, if any (see
// replayInit).
func (r *runner) sendReplay(p *peer, rp *replay, out *outbox) {
	for rp != nil {
		cl, line, answered, err := r.replayCall(p, rp)
		if err == nil {
			if p.sendingReplay(rp, cl) {
				r.traceReplay(p, cl, rp.params)
				p.send(line.segments()...)
				r.wg.Go(func() { r.awaitReplay(p, rp, answered) })
			}
			return
		}
		// p's dialect cannot carry these params: p never saw them.
		waiters, next, current := p.replayAnswered(rp)
		if current == nil {
			return // p failed again: its replays went with it
		}
		failCalls(waiters, wire.Errorf(codeInvalidParams, "%s: %v", p.getDialect().Initialize, err))
		rp = next
	}
	if out != nil {
		out.open() // every replay answered: what queued for p goes now, in order
	}
}

// startAfter starts p's new process on its link pending once delay has
// passed, and bounds its replayed initialization rp, if any (answered:
// see replayInit). Nothing is started if p failed again meanwhile (pending
// is no longer its link) or the chain is stopping; then what queued for p
// is answered at once with the usual error, so that shutdown does not wait
// for it.
func (r *runner) startAfter(delay time.Duration, p *peer, pending *link, rp *replay, answered <-chan struct{}) {
	if r.waitBackoff(delay) {
		r.mu.Lock()
		l, err := r.startPending(p, pending, rp)
		r.mu.Unlock()
		switch {
		case err != nil:
			r.componentFailed(p, err)
			return
		case l != nil:
			r.log.Warn("restarted component", zap.String("component", p.name), zap.Int("pid", l.proc.pid))
			if rp != nil {
				r.awaitReplay(p, rp, answered)
			}
			return
		}
	}
	r.mu.Lock()
	current := p.link.Load() == pending
	r.mu.Unlock()
	if current {
		pending.out.close()
		failCalls(p.fail(errStopped), r.stopError(p))
	}
}

// startPending starts p's process behind its pending link, with r.mu held:
// the new link takes over pending's outbox, and with it what queued there,
// first rp's replayed initialize, if any, which the trace now records.
// It returns nil, nil when there is nothing to start any more.
func (r *runner) startPending(p *peer, pending *link, rp *replay) (*link, error) {
	select {
	case <-r.stopping:
		return nil, nil
	default:
	}
	if p.link.Load() != pending {
		return nil, nil
	}
	proc, err := startProcess(p.comp, r.watch)
	if err != nil {
		return nil, startError(p.comp, err)
	}
	ch := wire.NewLineChannel(proc.stdout, proc.stdin, r.cfg.MaxMessageBytes).AllowEnvelope()
	l := &link{ch: ch, out: pending.out, proc: proc, readDone: make(chan struct{}), rethink: make(chan struct{}, 1)}
	if rp != nil && rp.record != nil {
		rp.record() // before it can be written, so before its answer
	}
	l.out.attach(wire.TryWriterOf(ch))
	p.link.Store(l)
	r.goLink(p, l)
	return l, nil
}

// waitBackoff waits out a restart's back-off, and reports false if the
// chain began to stop first.
func (r *runner) waitBackoff(d time.Duration) bool {
	if r.cfg.restartWait != nil {
		return r.cfg.restartWait(d, r.stopping)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopping:
		return false
	}
}

// backoff returns the delay before a restart that follows earlier ones
// within the restart window: the first waits first, each later one twice
// as long as the one before, up to most. Counting in the window, as the
// restart limit does, makes the delays grow only for a proxy that keeps
// failing, however long each of its processes takes to start and fail.
func backoff(earlier int, first, most time.Duration) time.Duration {
	d := first
	for range earlier {
		if d >= most {
			break
		}
		d *= 2
	}
	return min(d, most)
}

// awaitReplay fails a restarted proxy that does not answer its replayed
// initialization rp within the initialize timeout: everything sent to it
// waits behind that answer (outbox.hold). The initializes that waited for a later
// replay, of other params, get that error at once: sent again after the
// next restart, the same params could use up the restarts and stop the
// chain. Those of the replay that restores p wait for the next one.
func (r *runner) awaitReplay(p *peer, rp *replay, answered <-chan struct{}) {
	timeout := r.cfg.initTimeout()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-answered:
	case <-r.stopping:
	case <-t.C:
		waiters, stalled := p.replayStalled(rp)
		if !stalled {
			return // answered, or p failed again, meanwhile
		}
		cause := named(p.name, fmt.Errorf("component %q did not answer the replayed initialize within %v", p.name, timeout))
		failCalls(waiters, goneError(p, cause))
		r.componentFailed(p, cause)
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
	r.retire(p.link.Load())
	r.log.Error("BYPASSED component: the chain now runs without it", zap.String("component", p.name))
	return true
}
