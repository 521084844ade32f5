package conductor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

var errStopped = errors.New("the conductor is shutting down")

// beginStop starts the one shutdown path. The first failure is kept, even
// one that happens while the chain drains.
func (r *runner) beginStop(failed *peer, cause error) {
	if cause != nil {
		r.mu.Lock()
		if r.failure == nil {
			r.failed, r.failure = failed, cause
		}
		r.mu.Unlock()
	}
	r.stopOnce.Do(func() { close(r.stopping) })
}

// tell records why the chain stops, when no component failed it; the
// first reason stands.
func (r *runner) tell(why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = why
	}
}

// cause returns the failure that stopped the chain, if one did.
func (r *runner) cause() (*peer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.failure
}

// isStopped reports whether the components are being stopped: from then on
// a component's end is expected, and none is restarted.
func (r *runner) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// stopWhy is what the log says of cause, Run's ctx's, when it and the end
// of the client's input, in either order, stop the conductor at once. A
// cause that has a Signal method (acp-conductor's first signal, whose
// message tells the client that another one stops at once) is named by
// its signal alone: here no other one was needed.
func stopWhy(cause error) string {
	var sig interface{ Signal() os.Signal }
	if errors.As(cause, &sig) {
		return sig.Signal().String()
	}
	return cause.Error()
}

// shutdown is the one shutdown path, run once stopping is closed. Within
// one deadline, the grace period from now:
//
//  1. the client may start no more requests, and those in flight are
//     answered as they finish, with whatever the chain sends before them;
//     those left at the deadline, or at Abort, with the conductor's error;
//  2. input is closed along the chain, and the components exit;
//
// then every process group still alive gets SIGTERM, and SIGKILL a moment
// later. Abort skips to the signals, and so do ctx ending and the
// client's input ending, once both have, in either order: the client asked
// to stop by closing it, and whoever ends ctx (a signal) asks again. An
// editor such as acpx closes the agent's stdin, then sends SIGTERM, then
// SIGKILL 1.5s later; waiting out the grace for an agent that ignores the
// end of its input would get the conductor killed, its outcome unsaid. The
// order is no sign of intent: the editor's gap may be squeezed on a loaded
// machine, its input held by flow control, or a Ctrl-C may reach editor
// and conductor at once. The answers the conductor still owes the client
// get a moment to be queued (awaitOwed) before its output closes, and what
// is left for it gets until one second past the deadline to be written:
// an editor that closed its input may still read.
func (r *runner) shutdown(ctx context.Context, client *peer, flushed <-chan struct{}, in io.Reader) {
	start := time.Now()
	grace := r.cfg.grace()
	aborted, cancel := context.WithCancel(context.Background())
	defer cancel()
	told, ended := ctx.Done(), client.link.Load().readDone
	// Which came first is read here, if one did, where it may have begun
	// the shutdown: the watcher may run late, and find both.
	toldFirst := isClosed(told) && !isClosed(ended)
	known := isClosed(told) || isClosed(ended)
	watched := make(chan struct{})
	r.wg.Go(func() {
		defer close(watched)
		for range 2 { // until both have happened; each is then nil
			select {
			case <-told:
				told, toldFirst, known = nil, toldFirst || !known, true
			case <-ended:
				ended, known = nil, true
			case <-r.cfg.Abort: // nil, which never fires, without Abort
				r.log.Info("stopping at once")
				cancel()
				return
			case <-aborted.Done():
				return
			}
		}
		msg := "stopping at once: told to stop after the client's input ended"
		if toldFirst {
			msg = "stopping at once: the client's input ended after it was told to stop"
		}
		r.log.Info(msg, zap.String("why", stopWhy(context.Cause(ctx))))
		cancel()
	})

	var out outcome
	out.unanswered = r.drain(aborted, client, start.Add(grace))
	out.aborted = aborted.Err() != nil
	r.abandonAll(client)
	out.signalled, out.cutShort = r.stopAll(aborted, start.Add(grace))
	// Nothing is left to cut short; closing in below ends the client's
	// input, which must not read as a reason to stop at once.
	cancel()
	<-watched
	if r.bridge != nil {
		r.bridge.Close()
	}
	// Whatever is still pending will never be answered now.
	for _, p := range r.comps {
		failCalls(p.fail(errStopped), r.stopError(p))
	}
	out.lost = r.awaitOwed(client)
	if n := r.chain.sealedDrops.Load(); n > 0 {
		r.log.Info("dropped notifications for the client that came after it was told its requests failed", zap.Int64("count", n))
	}
	cl := client.link.Load()
	cl.out.close()
	flush := time.NewTimer(max(time.Until(start.Add(grace+time.Second)), outputBound))
	defer flush.Stop()
	select {
	case <-flushed:
	case <-flush.C:
		// The client stopped reading. Closing out (if Run may) is the
		// only way to unblock the write; without it Run would hang.
		out.clientStuck = true
		if c, ok := r.out.(io.Closer); ok {
			c.Close()
		}
	}
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
	if failed, _ := r.cause(); failed != nil {
		out.failed, out.others = failed.name, len(r.comps) > 1
	}
	out.took = time.Since(start)
	out.log(r.log, grace)
}

// drain stops the client's new requests and waits until those in flight
// are answered, the deadline passes, or stop is done, and returns how many
// are left. If the chain failed (a component, or its watchdog) before the
// client asked anything, the client's first request is waited for too, and
// answered with the failure, so that an editor shows why the agent is gone.
func (r *runner) drain(stop context.Context, client *peer, deadline time.Time) int {
	ctx, cancel := context.WithDeadline(stop, deadline)
	defer cancel()
	idle := client.stopTaking(r.refusal())
	r.log.Debug("draining: the client's new requests are refused", zap.Int("inFlight", client.inFlightCount()))
	if _, cause := r.cause(); cause != nil {
		r.log.Debug("draining: the chain failed; the client's next request is awaited, to be told why")
		select {
		case <-client.asked:
		case <-client.link.Load().readDone: // its input ended
		case <-ctx.Done():
		}
	}
	select {
	case <-idle:
		return 0
	case <-ctx.Done():
		return client.inFlightCount()
	}
}

// abandonAll answers what still waits on either side of the client once
// the drain is over, with the conductor's own error, before any
// component's input closes: the client's requests in flight, and the
// requests made of it (an agent's permission request, say), which it may
// no longer take. A proxy whose input ends answers what it passed on with
// an error of its own, which knows less, and an agent hears nothing. An
// answer that comes later is dropped. The client's bridged MCP servers go
// with it (chain.ownerEnded).
func (r *runner) abandonAll(client *peer) {
	calls := client.inFlightCalls()
	if len(calls) > 0 {
		// Sealed before the errors are queued, so that nothing the chain
		// still sends about those requests follows them: the route drops
		// what it routes from now on, and the outbox, under its own lock,
		// what was routed before and is put after (an update in a
		// reader's hands at this moment, an MCP notification the MCP
		// router addresses to the client by its own ids).
		r.chain.seal()
		client.link.Load().out.seal(&r.chain.sealedDrops)
	}
	for _, cl := range calls {
		failCalls([]*call{cl}, r.stopError(cl.to))
	}
	failCalls(client.fail(errStopped), r.stopError(client))
	r.chain.ownerEnded(client.pos)
}

// refusal is the answer to a request the client makes while the chain
// stops: the failure that stopped it, if one did.
func (r *runner) refusal() *wire.Error {
	switch failed, cause := r.cause(); {
	case failed != nil:
		return goneError(failed, cause)
	case cause != nil: // the chain's own, such as its watchdog's
		return wire.Errorf(codeInternalError, "%v: %v", errStopped, cause)
	}
	return wire.Errorf(codeInternalError, "%s", r.stopReason())
}

// stopError is the answer to requests pending on p cut off by the
// shutdown: the failure that caused it, if there was one, so the editor
// hears the real cause; else why the conductor stops, and p, the one
// component the conductor knows the request waited on (a proxy may have
// passed it on), with how p is doing.
func (r *runner) stopError(p *peer) *wire.Error {
	switch failed, cause := r.cause(); {
	case failed != nil:
		return goneError(failed, cause)
	case cause != nil: // the chain's own, such as its watchdog's
		return wire.Errorf(codeInternalError, "%v: %v", errStopped, cause)
	}
	e := wire.Errorf(codeInternalError, "%s; the request was waiting on %s", r.stopReason(), p.name)
	if proc := p.proc(); proc != nil {
		e = e.WithData(proc.describeExit())
	}
	return e
}

// stopReason says, when no failure stops the chain, that the conductor is
// shutting down, and what told it to, if it knows.
func (r *runner) stopReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told != nil {
		return fmt.Sprintf("%v: %v", errStopped, r.told)
	}
	return errStopped.Error()
}

// owedBound bounds awaitOwed: whoever owes the client an answer only
// queues it, never waits, so it comes at once; the bound only keeps one
// that never comes from holding the shutdown.
const owedBound = 100 * time.Millisecond

// awaitOwed waits, up to owedBound, until the answers the conductor owes
// the client (call.take) are queued, and returns how many were not. The
// goroutines that owe them (a restart's back-off given up, a timer) are
// not the shutdown's to wait for, and a drain that ended at its deadline
// or on Abort, rather than with the client idle, did not wait for them
// either; abandonAll passed their calls by, as they were no longer in
// flight. Closed first, the client's output would drop those answers.
func (r *runner) awaitOwed(client *peer) int {
	n, idle := client.owing()
	if n == 0 {
		return 0
	}
	r.log.Debug("waiting for the answers the conductor owes the client before its output closes", zap.Int("owed", n))
	t := time.NewTimer(owedBound)
	defer t.Stop()
	select {
	case <-idle:
		return 0
	case <-t.C:
		n, _ = client.owing()
		return n
	}
}

// minEOF is how long components get to exit after their input closes when
// draining took the whole grace period.
const minEOF = 100 * time.Millisecond

// stopAll stops every component and returns what had to be signalled, and
// whether that was because stop was done before the deadline.
// Input is closed along the chain, nearest the client first, each once its
// predecessor has closed its output (what a proxy forwards on its way out
// still reaches its successor), or all at once when the deadline passes.
// Components still running at the deadline, and the replaced processes
// of restarted and bypassed ones (retire), get SIGTERM to their process
// groups, all at once, and SIGKILL after termBound. It returns when every
// component has been reaped and its output read to the end, or after
// bounds that nothing can stretch.
func (r *runner) stopAll(stop context.Context, deadline time.Time) (sent []signalled, cutShort bool) {
	r.mu.Lock()
	r.stopped = true // no restart from here on
	retired := r.retired
	r.mu.Unlock()
	if r.watch != nil {
		// Before any component may exit and orphan what it started: the
		// watchdog's Close kills what this finds, marked or not.
		r.watch.Snapshot()
	}
	if soonest := time.Now().Add(minEOF); deadline.Before(soonest) {
		deadline = soonest
	}
	ctx, cancel := context.WithDeadline(stop, deadline)
	defer cancel()
	for _, p := range r.comps {
		l := p.link.Load()
		l.out.close()
		if ctx.Err() == nil {
			select {
			case <-l.readDone:
			case <-l.proc.exited:
				// What it wrote is read; what it started outside its group
				// may hold its output open for as long as it likes.
				afterExit := time.NewTimer(outputBound)
				select {
				case <-l.readDone:
				case <-afterExit.C:
				case <-ctx.Done():
				}
				afterExit.Stop()
			case <-ctx.Done():
			}
		}
	}
	// Readers still waiting for a full outbox (the client's, when it stopped
	// reading) would never see their component's end: let them go on.
	r.chain.flow.release()
	for _, p := range r.comps {
		select {
		case <-p.proc().exited:
		case <-ctx.Done():
		}
	}
	// The processes of restarted and bypassed components, whose input
	// closed when they were replaced, get no longer than the components:
	// those still running are signalled with them below, and named in the
	// outcome; cut tells their link.stop, whose end Run waits for, to
	// leave the signals to this.
	for _, l := range retired {
		select {
		case <-l.proc.exited:
		case <-ctx.Done():
		}
	}
	close(r.cut)

	cutShort = stop.Err() != nil
	// A bypassed component's process is its retired one too: it is named
	// once, as the component.
	current := make(map[*process]bool, len(r.comps))
	for _, p := range r.comps {
		current[p.proc()] = true
	}
	// A process its own stop killed before cut (retire: a restarted
	// one's old process, or a bypassed component's) is named as such,
	// once, and not signalled again: it is dying of that SIGKILL, which
	// the outcome must not put down to the shutdown's SIGTERM.
	killedBefore := map[*process]bool{}
	ownKill := func(proc *process, name string) {
		if proc.killed.Load() && !proc.hasExited() && !killedBefore[proc] {
			killedBefore[proc] = true
			sent = append(sent, signalled{component: name, signal: "SIGKILL", own: true})
		}
	}
	for _, p := range r.comps {
		ownKill(p.proc(), p.name)
	}
	for _, l := range retired {
		ownKill(l.proc, replacedName(l.proc))
	}
	// escalate sends sig to the processes still running and returns them.
	escalate := func(sig string, send func(*process)) []*process {
		var left []*process
		var names []string
		add := func(proc *process, name string) {
			if !proc.hasExited() {
				left = append(left, proc)
				names = append(names, name)
				sent = append(sent, signalled{component: name, signal: sig})
			}
		}
		for _, p := range r.comps {
			if !killedBefore[p.proc()] {
				add(p.proc(), p.name)
			}
		}
		for _, l := range retired {
			if current[l.proc] || killedBefore[l.proc] {
				continue
			}
			add(l.proc, replacedName(l.proc))
		}
		if len(left) == 0 {
			return nil
		}
		// Logged as it happens, before the outcome: when each signal went.
		r.log.Debug("signalling the components still running", zap.String("signal", sig), zap.Strings("components", names))
		for _, proc := range left {
			send(proc)
		}
		return left
	}
	r.awaitExits(escalate("SIGTERM", func(p *process) { p.signal(syscall.SIGTERM) }), termBound)
	// Those its own stop killed are waited for with those killed here,
	// within the one bound: each in turn would take one bound apiece.
	killed := escalate("SIGKILL", func(p *process) { p.signal(syscall.SIGKILL) })
	for proc := range killedBefore {
		killed = append(killed, proc)
	}
	r.awaitExits(killed, killBound)

	// Every process is gone, but whatever it started outside its group may
	// still hold its output open: give up on that after outputBound.
	outputs, cancelOutputs := context.WithTimeout(context.Background(), outputBound)
	defer cancelOutputs()
	for _, p := range r.comps {
		p.link.Load().endOutputs(outputs)
	}
	return sent, cutShort
}

// awaitExits waits until every process of procs has exited, or bound has
// passed: one bound for them all, as they were signalled at once.
func (r *runner) awaitExits(procs []*process, bound time.Duration) {
	if len(procs) == 0 {
		return
	}
	if r.cfg.exitWait != nil {
		exitedBy(procs, r.cfg.exitWait(bound))
		return
	}
	wait := time.NewTimer(bound)
	defer wait.Stop()
	exitedBy(procs, wait.C)
}

// exitedBy waits until every process of procs has exited, and reports
// true, or until timeout fires, and reports false.
func exitedBy(procs []*process, timeout <-chan time.Time) bool {
	for _, proc := range procs {
		select {
		case <-proc.exited:
		case <-timeout:
			return false
		}
	}
	return true
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// replacedName names the process of a restarted or bypassed component in
// the shutdown's outcome: a component restarted twice may leave two, and
// its pid tells them apart, as the log of its restart has it.
func replacedName(proc *process) string {
	return fmt.Sprintf("%s (replaced, pid %d)", proc.name, proc.pid)
}

// A signalled component is one that did not exit in time by itself. own
// is set for a process of a restarted or bypassed component that its own
// stop had killed (SIGKILL) before the shutdown's signals.
type signalled struct {
	component, signal string
	own               bool
}

// outcome is what shutdown says about itself, once.
type outcome struct {
	unanswered  int
	aborted     bool // told to stop at once before the drain was over
	lost        int  // answers owed to the client that were not queued when its output closed
	signalled   []signalled
	cutShort    bool // told to stop at once before the components' time was up
	clientStuck bool
	failed      string // the component whose failure stopped the chain
	others      bool   // whether the chain had components besides it
	took        time.Duration
}

func (o outcome) log(log *zap.Logger, grace time.Duration) {
	var problems []string
	switch {
	case o.unanswered > 0 && o.aborted:
		problems = append(problems, fmt.Sprintf("%d request(s) from the client were still unanswered when it was told to stop at once", o.unanswered))
	case o.unanswered > 0:
		problems = append(problems, fmt.Sprintf("%d request(s) from the client were still unanswered after the %v grace period", o.unanswered, grace))
	}
	if o.lost > 0 {
		problems = append(problems, fmt.Sprintf("%d answer(s) the conductor owed the client were still not queued after %v, and were lost when its output closed", o.lost, owedBound))
	}
	killed := map[string]bool{}
	for _, s := range o.signalled {
		if s.signal == "SIGKILL" {
			killed[s.component] = true
		}
	}
	for _, s := range o.signalled {
		switch {
		case s.own:
			problems = append(problems, fmt.Sprintf("%s did not exit within the %v grace period after its input closed as it was restarted or bypassed, nor on SIGTERM, and had been killed with SIGKILL by then", s.component, grace))
		case s.signal == "SIGTERM" && !killed[s.component] && o.cutShort:
			problems = append(problems, fmt.Sprintf("%s was still running when the conductor was told to stop at once, and was stopped with SIGTERM", s.component))
		case s.signal == "SIGTERM" && !killed[s.component]:
			problems = append(problems, fmt.Sprintf("%s did not exit within the %v grace period and was stopped with SIGTERM", s.component, grace))
		case s.signal == "SIGKILL" && o.cutShort:
			problems = append(problems, fmt.Sprintf("%s was still running when the conductor was told to stop at once, and was killed with SIGKILL when it did not exit on SIGTERM", s.component))
		case s.signal == "SIGKILL":
			problems = append(problems, fmt.Sprintf("%s did not exit within the %v grace period nor on SIGTERM, and was killed with SIGKILL", s.component, grace))
		}
	}
	if o.clientStuck {
		problems = append(problems, "the client stopped reading; what it had not read was dropped")
	}
	if len(problems) == 0 {
		// The failed one did not wait for its input to close: the
		// failure, logged already, says how it ended.
		msg := "stopped: every component exited after its input closed"
		switch {
		case o.failed != "" && o.others:
			msg = fmt.Sprintf("stopped after %s failed: the other components exited after their input closed", o.failed)
		case o.failed != "":
			msg = fmt.Sprintf("stopped after %s failed", o.failed)
		}
		log.Info(msg, zap.Duration("took", o.took))
		return
	}
	log.Warn("stopped: "+strings.Join(problems, "; "), zap.Duration("took", o.took))
}
