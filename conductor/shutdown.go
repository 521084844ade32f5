package conductor

import (
	"errors"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

var errStopped = errors.New("the conductor is shutting down")

// beginStop starts the one shutdown path; the first caller's cause is kept.
func (r *runner) beginStop(failed *peer, cause error) {
	r.stopOnce.Do(func() {
		r.failed, r.failure = failed, cause
		close(r.stopping)
	})
}

// shutdown is the one shutdown path, run once stopping is closed: it stops
// every component, answers what is still pending, and lets the client's
// writer (cl, which closes flushed when done) finish within the grace
// period before giving up on the client.
func (r *runner) shutdown(cl *link, flushed <-chan struct{}, in io.Reader) {
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
	case <-time.After(r.cfg.grace()):
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
}

// stopError is the answer to requests cut off by the shutdown: the failure
// that caused it, if there was one, so the editor hears the real cause.
func (r *runner) stopError(p *peer) *wire.Error {
	if r.failed != nil {
		return goneError(r.failed, r.failure)
	}
	return goneError(p, errStopped)
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
	grace := r.cfg.grace()
	for _, p := range r.comps {
		l := p.link.Load()
		l.out.close()
		select {
		case <-l.readDone:
			p.log.Debug("component closed its output")
		case <-time.After(grace):
			p.log.Warn("component still writing after its input closed", zap.Duration("grace", grace))
		}
	}
	var wg sync.WaitGroup
	for _, p := range r.comps {
		wg.Go(func() { p.proc().stop(grace) })
	}
	wg.Wait()
	for _, p := range r.comps {
		<-p.link.Load().readDone
	}
}
