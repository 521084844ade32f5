package mcpbridge

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// refusalInterval spaces the warnings about refused connections and
// requests: the first of a burst is logged with its details, the rest only
// counted, and the count logged when the interval ends. Anyone on the
// machine can knock on the HTTP port, and the log must not grow with every
// knock.
var refusalInterval = 10 * time.Second

// refusals is the rate-limited log of refused shims and HTTP requests.
type refusals struct {
	log  *zap.Logger
	kick chan struct{} // a count waits to be logged

	mu         sync.Mutex
	windowEnd  time.Time // refusals before it are only counted
	suppressed int
	last       []zap.Field // the details of the last one counted
}

func newRefusals(log *zap.Logger) *refusals {
	return &refusals{log: log, kick: make(chan struct{}, 1)}
}

// refused logs one refusal, or counts it if one was logged less than
// refusalInterval ago. The fields must never hold a presented secret.
func (r *refusals) refused(msg string, fields ...zap.Field) {
	now := time.Now()
	r.mu.Lock()
	if now.Before(r.windowEnd) {
		r.suppressed++
		r.last = append([]zap.Field{zap.String("last", msg)}, fields...)
		r.mu.Unlock()
		select {
		case r.kick <- struct{}{}:
		default:
		}
		return
	}
	r.windowEnd = now.Add(refusalInterval)
	r.mu.Unlock()
	r.log.Warn(msg, fields...)
}

// flush logs how many refusals were counted and not logged, if any, and
// reports whether there were.
func (r *refusals) flush() bool {
	r.mu.Lock()
	n, last := r.suppressed, r.last
	r.suppressed, r.last = 0, nil
	if n == 0 {
		r.windowEnd = time.Time{} // the next one is logged at once
	} else {
		r.windowEnd = time.Now().Add(refusalInterval)
	}
	r.mu.Unlock()
	if n > 0 {
		r.log.Warn("more MCP bridge connections refused", append([]zap.Field{zap.Int("count", n)}, last...)...)
	}
	return n > 0
}

// run logs the counts at the end of each interval that had any, until ctx
// is done, and then what is left.
func (r *refusals) run(ctx context.Context) {
	defer r.flush()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		for {
			r.mu.Lock()
			wait := time.Until(r.windowEnd)
			r.mu.Unlock()
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			if !r.flush() {
				break
			}
		}
	}
}
