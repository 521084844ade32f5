package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"
)

// A hold is the budget one POST body holds: bytes of the server's and, once
// the body is known to be for one, of a connection's. The budgets bound
// what bodies being read, or waiting for their chain to take them, hold:
// without them, a token holder's concurrent POSTs, each up to
// MaxMessageBytes, could make the server hold any amount of memory.
type hold struct {
	s    *Server
	c    *httpConn // nil until the body's connection is known
	n    int64     // held of the server's budget
	conn int64     // held of c's
}

// grow holds n more bytes, waiting, unread, while a budget has no room for
// them, as a writer waits on a full pipe: the chains' reading makes room.
// (A POST refused instead would fail the connection of a TypeScript SDK
// client, which does so when one of its notifications is.) Each wait is
// for the whole of n, never part, so POSTs cannot each hold part of what
// another waits for.
func (h *hold) grow(ctx context.Context, n int64) error {
	if h.c != nil && !h.c.pending.TryAcquire(n) {
		h.s.waited()
		if err := h.c.pending.Acquire(ctx, n); err != nil {
			return err
		}
	}
	if !h.s.pending.TryAcquire(n) {
		h.s.waited()
		if err := h.s.pending.Acquire(ctx, n); err != nil {
			if h.c != nil {
				h.c.pending.Release(n)
			}
			return err
		}
	}
	h.n += n
	if h.c != nil {
		h.conn += n
	}
	return nil
}

func (s *Server) waited() {
	if s.bodyWaits != nil {
		s.bodyWaits()
	}
}

// bind charges what h holds to c too, for an initialize whose connection
// is made after its body was read. c is new, so its budget has room.
func (h *hold) bind(c *httpConn) {
	h.c = c
	if d := h.n - h.conn; d > 0 && c.pending.TryAcquire(d) {
		h.conn += d
	}
}

// keep lets go of all but n bytes: what the message handed to the
// connection holds until its chain reads it (see httpConn.take).
func (h *hold) keep(n int64) {
	if d := h.n - n; d > 0 {
		h.s.pending.Release(d)
		h.n -= d
	}
	if d := h.conn - n; d > 0 && h.c != nil {
		h.c.pending.Release(d)
		h.conn -= d
	}
}

// release lets go of everything h holds.
func (h *hold) release() { h.keep(0) }

// readBody reads r's body, up to MaxMessageBytes, once the budgets hold
// room for it: its Content-Length, or MaxMessageBytes when it has none,
// the rest let go of once it is read. The caller releases the hold.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, c *httpConn) ([]byte, *hold, error) {
	h := &hold{s: s, c: c}
	n := r.ContentLength
	if n < 0 {
		n = int64(s.MaxMessageBytes)
	}
	if err := h.grow(r.Context(), n); err != nil {
		return nil, h, err
	}
	// What the body holds, it holds until it ends: one that never does,
	// or comes a byte at a time, would hold it for ever, and make every
	// POST behind it wait.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.BodyTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	body := http.MaxBytesReader(w, r.Body, int64(s.MaxMessageBytes))
	if r.ContentLength >= 0 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, h, err
		}
		return buf, h, nil
	}
	buf, err := io.ReadAll(body)
	if err != nil {
		return nil, h, err
	}
	h.keep(int64(len(buf)))
	return buf, h, nil
}

// refuseBody answers a POST whose body was not read whole. An HTTP/1.x
// connection is closed after the answer, else net/http would read what is
// left of the body first (see Guard).
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	http.Error(w, msg, status)
}

// bodyError answers a POST whose body readBody could not read.
func (s *Server) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		s.refuseBody(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("message exceeds %d bytes", s.MaxMessageBytes))
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.refuseBody(w, r, http.StatusRequestTimeout, fmt.Sprintf("the body did not arrive within %s", s.BodyTimeout))
	case r.Context().Err() != nil:
		// The client gave up, waiting for room or sending its body.
		s.refuseBody(w, r, http.StatusServiceUnavailable, "the request was abandoned")
	default:
		s.refuseBody(w, r, http.StatusBadRequest, "reading the body: "+err.Error())
	}
}

func newBudget(n int) *semaphore.Weighted { return semaphore.NewWeighted(int64(n)) }
