package conductor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A successorInit is a proxy's initialize of its successor, by its params,
// and the result its successor answered it with.
type successorInit struct{ params, result json.RawMessage }

// maxSuccessorInits bounds the answers kept per proxy: initializes are few,
// and one with params not kept goes to the successor again.
const maxSuccessorInits = 8

// A replay is one initialization a restarted proxy is sent again, with
// the params its callers gave: the one that restores it (see
// recordedInit), or that of an initialize its old process left
// unanswered with other params. waiters are those initialize requests, which get its answer
// (see runner.settle); call is the conductor's request, nil until sent.
type replay struct {
	params   json.RawMessage
	call     *call
	waiters  []*call
	restores bool // the first, which restores p
	// record, in a traced chain, records the first as sent, as the
	// process it restores starts (runner.startPending).
	record func()
}

// replace gives a restarted component its new link, with rp's call (if
// any) as its only call. It returns the calls the old process will never
// answer, and those it made that are still in flight: their answers are
// for no one now (see call.done), as the new process numbers its requests
// afresh. The initializes among the first wait instead for a replay of
// their own params, in the order p was sent them, but for those their
// callers cancelled (cancelInit), which it returns in cancelled; without
// rp, they are unanswered too. That is done under the hold of p.mu that
// installs the new link, so that a cancel finds each either pending on the
// old process or waiting for its replay, never in between. The peer takes
// requests again at once; they queue on the new link.
func (p *peer) replace(l *link, rp *replay) (unanswered, cancelled, orphaned []*call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	taken := p.takeCalls()
	for c := p.inflight.head; c != nil; c = p.inflight.head {
		p.inflight.remove(c)
		orphaned = append(orphaned, c)
	}
	p.idleIfNone()
	if rp != nil {
		p.calls[rp.call.id] = rp.call
		p.replays = []*replay{rp}
		slices.SortFunc(taken, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	}
	for _, c := range taken {
		switch {
		case rp == nil || c.from == nil || !wire.IsInitialize(c.method):
			unanswered = append(unanswered, c)
		case slices.Contains(p.cancelled, c):
			cancelled = append(cancelled, c)
		default:
			p.waitForReplay(c)
		}
	}
	p.cancelled = nil
	p.gone = nil
	p.reinit.Store(len(p.successorInits) > 0)
	p.reinitFirst = true
	// The new process may be another program: until it passes an
	// initialize on, a refusal of one is its own.
	p.passedInit.Store(false)
	p.link.Store(l)
	return unanswered, cancelled, orphaned
}

// takeCalls empties p's calls, and the waiters of its replays, and
// returns them. p.mu is held.
func (p *peer) takeCalls() []*call {
	calls := make([]*call, 0, len(p.calls))
	for _, c := range p.calls {
		calls = append(calls, c)
	}
	clear(p.calls)
	for _, rp := range p.replays {
		calls = append(calls, rp.waiters...)
	}
	p.replays = nil
	return calls
}

// waitForReplay has cl, an initialize p's old process left unanswered,
// wait for the replay of its own params: the first's, if they are the
// same, else one that follows the others. p.mu is held.
func (p *peer) waitForReplay(cl *call) {
	for _, rp := range p.replays {
		if bytes.Equal(rp.params, cl.params) {
			rp.waiters = append(rp.waiters, cl)
			return
		}
	}
	p.replays = append(p.replays, &replay{params: cl.params, waiters: []*call{cl}})
}

// replayAnswered takes the calls that wait for rp's answer, which has
// come, and returns the replay to send next, if any, and the outbox of
// the link rp went on: none if p failed again since, which took them with
// its calls, and the answer is the conductor's.
func (p *peer) replayAnswered(rp *replay) (waiters []*call, next *replay, out *outbox) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp {
		return nil, nil, nil
	}
	out = p.link.Load().out
	p.replays = p.replays[1:]
	if rp.restores {
		// Only the restoring replay's initialize may take the oldest
		// answer kept (takeReinit): answered without one, it took none,
		// and a later one with params never answered is not it.
		p.reinitFirst = false
	}
	if len(p.replays) > 0 {
		next = p.replays[0]
	} else {
		p.reinit.Store(false) // restored: its initializes go on as anyone's
	}
	return rp.waiters, next, out
}

// replayCurrent reports whether rp is the replay in flight on p: not if
// p failed since.
func (p *peer) replayCurrent(rp *replay) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.replays) > 0 && p.replays[0] == rp
}

// sendingReplay records cl as rp's call, and reports whether rp is still
// the replay to send: not if p failed since.
func (p *peer) sendingReplay(rp *replay, cl *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp {
		return false
	}
	rp.call = cl
	p.calls[cl.id] = cl
	return true
}

// replayStalled reports whether rp is still the replay in flight on p,
// unanswered, and takes its waiters unless it is the one that restores p.
func (p *peer) replayStalled(rp *replay) (waiters []*call, stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp || rp.call == nil || p.calls[rp.call.id] != rp.call {
		return nil, false
	}
	if !rp.restores {
		waiters, rp.waiters = rp.waiters, nil
	}
	return waiters, true
}

// cancelInit takes the cancel of cl, an initialize sent to p. If cl waits
// for a replay, or to be sent on past p, bypassed, it waits no more, and
// cancelInit reports so: the conductor answers it. A replay not yet sent that nobody waits for any more is not
// sent; one sent goes on, as the proxy is being initialized. If cl is
// pending on p's process, it is noted, so that a restart before that
// process answers it answers it as cancelled rather than send it again
// (see replace), and that process's link is returned, for the cancel: a
// restart may replace it before the cancel goes, and the new process
// never saw cl. Otherwise cl was answered meanwhile, and neither is.
func (p *peer) cancelInit(cl *call) (waited bool, pending *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, rp := range p.replays {
		if j := slices.Index(rp.waiters, cl); j >= 0 {
			rp.waiters = slices.Delete(rp.waiters, j, j+1)
			if i > 0 && len(rp.waiters) == 0 {
				p.replays = slices.Delete(p.replays, i, i+1)
			}
			return true, nil
		}
	}
	if i := slices.Index(p.resending, cl); i >= 0 {
		p.resending = slices.Delete(p.resending, i, i+1)
		return true, nil
	}
	if p.calls[cl.id] != cl {
		return false, nil
	}
	// Those answered since they were noted go: what is kept is bounded
	// by what is pending.
	p.cancelled = slices.DeleteFunc(p.cancelled, func(c *call) bool { return p.calls[c.id] != c })
	if !slices.Contains(p.cancelled, cl) {
		p.cancelled = append(p.cancelled, cl)
	}
	return false, p.link.Load()
}

// recordedInit returns the params a restart replays first, to restore p:
// those of the first initialize p took; failing that, those of the
// earliest still pending on it (as a replay, or from a caller), which it
// may take yet; nil if there are none. Params it refused, or that its
// dialect could not carry, would only fail every restart.
func (p *peer) recordedInit() json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initParams != nil {
		return p.initParams
	}
	if len(p.replays) > 0 {
		return p.replays[0].params
	}
	var first *call
	for _, c := range p.calls {
		if c.from != nil && wire.IsInitialize(c.method) && (first == nil || c.id < first.id) {
			first = c
		}
	}
	if first == nil {
		return nil
	}
	return first.params
}

// allowRestart records a restart and reports whether it is within limit
// restarts in window, and how many came before it in window.
func (p *peer) allowRestart(now time.Time, limit int, window time.Duration) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	recent := p.restarts[:0]
	for _, t := range p.restarts {
		if now.Sub(t) < window {
			recent = append(recent, t)
		}
	}
	p.restarts = recent
	if len(recent) >= limit {
		return len(recent), false
	}
	p.restarts = append(p.restarts, now)
	return len(recent), true
}

// rememberInit records params, those of an initialize p took as a proxy,
// for replaying after a restart, unless it took one before.
func (p *peer) rememberInit(params json.RawMessage) {
	p.mu.Lock()
	if p.initParams == nil {
		p.initParams = params
	}
	p.mu.Unlock()
}

// rememberSuccessorInit records result, what p's successor answered p's
// initialize of params, for answering it after a restart: the latest
// answer for those params, beside those for other params, the oldest of
// which goes past maxSuccessorInits.
func (p *peer) rememberSuccessorInit(params, result json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.successorInits {
		if bytes.Equal(p.successorInits[i].params, params) {
			p.successorInits[i].result = result
			return
		}
	}
	if len(p.successorInits) == maxSuccessorInits {
		p.successorInits = slices.Delete(p.successorInits, 0, 1)
	}
	// A copy: params alias the line they came in.
	p.successorInits = append(p.successorInits, successorInit{bytes.Clone(params), result})
}

// takeReinit returns the answer to give p's initialize of its successor
// with params, if p is a restarted proxy whose replays the conductor
// answers itself: what the successor answered the same params, so that
// each replay is answered for its own. The first after the restart, which
// restores p, gets the oldest answer kept if its params were not seen
// (the first initialize's, until more than maxSuccessorInits params have
// been answered), as the successor is initialized already; a later one
// whose params were not seen goes to the successor.
func (p *peer) takeReinit(params json.RawMessage) (json.RawMessage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reinit.Load() || len(p.successorInits) == 0 {
		return nil, false
	}
	first := p.reinitFirst
	p.reinitFirst = false
	if len(p.replays) == 0 {
		p.reinit.Store(false) // nothing replayed waits for the others
	}
	for _, si := range p.successorInits {
		if bytes.Equal(si.params, params) {
			return si.result, true
		}
	}
	if first {
		return p.successorInits[0].result, true
	}
	return nil, false
}

// restarted reports whether takeReinit may answer. It is read for every
// message the peer sends, so it takes no lock.
func (p *peer) restarted() bool { return p.reinit.Load() }

// pendingInitialize reports whether an initialize sent to p is unanswered,
// leaving out the conductor's replays, which have bounds of their own
// (runner.awaitReplay).
func (p *peer) pendingInitialize() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		if c.from != nil && wire.IsInitialize(c.method) {
			return true
		}
	}
	return false
}

// failBypassed is fail for p, a proxy taken out of the chain: the
// initializes among the calls it returns wait in resending to be sent on
// to its successor, but for those their callers cancelled while p held
// them (cancelInit), their cancel gone to p, which it returns apart. That
// is done under the one hold of p.mu that takes them, so that a cancel
// finds each either pending on p or waiting to be sent on, never in
// between. It also takes p's own requests in flight, which no one awaits
// any more, and returns them as orphaned, as replace does.
func (p *peer) failBypassed(cause error) (calls, cancelled, orphaned []*call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone == nil {
		p.gone = cause
	}
	for c := p.inflight.head; c != nil; c = p.inflight.head {
		p.inflight.remove(c)
		orphaned = append(orphaned, c)
	}
	p.idleIfNone()
	for _, c := range p.takeCalls() {
		switch {
		case c.from == nil || !wire.IsInitialize(c.method):
			calls = append(calls, c)
		case slices.Contains(p.cancelled, c):
			cancelled = append(cancelled, c)
		default:
			p.resending = append(p.resending, c)
			calls = append(calls, c)
		}
	}
	p.cancelled = nil
	return calls, cancelled, orphaned
}

// resendHeld runs send, which sends cl on past p, bypassed, and reports
// whether it did: not if cl was cancelled since (cancelInit). send runs
// under p.mu, so that a cancel that found cl waits until cl's successor
// call has taken its place, and finds that instead (see chain.cancel).
func (p *peer) resendHeld(cl *call, send func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.resending, cl)
	if i < 0 {
		return false
	}
	p.resending = slices.Delete(p.resending, i, i+1)
	send()
	return true
}

// retrack puts c in old's place among p's requests in flight, in one
// step, so that a cancel by their id finds one or the other. It reports
// false if old is not there (p's process was restarted since), or, once p
// may start no more requests, takes old off and returns the error to
// refuse it with; the caller queues the refusal and then calls
// answerQueued, for until then the shutdown's drain, which may close p's
// output as soon as p is idle, must not see p idle.
func (p *peer) retrack(old, c *call) (bool, *wire.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refusing != nil {
		if p.inflight.remove(old) {
			p.owed++
			return false, p.refusing
		}
		return false, nil
	}
	return p.inflight.replace(old, c), nil
}
