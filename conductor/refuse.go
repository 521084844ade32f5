package conductor

import (
	"context"
	"io"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Refuse serves a client for a chain that cannot start (a bad chain file, a
// program not found): it answers the client's first request on in and out
// with a JSON-RPC error carrying cause, so that an editor shows why rather
// than a closed pipe, and returns cause. It waits up to cfg's grace period
// for that request, and only cfg.GracePeriod and cfg.MaxMessageBytes matter.
func Refuse(ctx context.Context, cfg Config, in io.Reader, out io.Writer, cause error) error {
	return refuse(ctx, cfg, in, out, cause, "")
}

// refuse answers the client's first request with cause, a chain that could
// not start, so that an editor shows why rather than a closed pipe; then Run
// returns cause. It gives up after the grace period if no request comes.
func refuse(ctx context.Context, cfg Config, in io.Reader, out io.Writer, cause error, component string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.grace())
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
			e := wire.Errorf(codeInternalError, "%v", cause)
			if component != "" {
				e = e.WithData(exitError{Component: component, Status: "did not start"})
			}
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
