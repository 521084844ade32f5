package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"

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
// Lines it cannot read before that request are answered as the relay
// answers them, with cause, under null.
func refuse(ctx context.Context, cfg Config, in io.Reader, out io.Writer, cause error, component string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.grace())
	defer cancel()
	ch := wire.NewLineChannel(in, nopCloser{out}, cfg.MaxMessageBytes)
	// first carries the ids of the first line's requests: one, or those of
	// a batch, which a running chain would answer together in a batch.
	type requests struct {
		ids   []json.RawMessage
		batch bool
	}
	first := make(chan requests, 1)
	go func() { // owned: refuse waits for first to close
		defer close(first)
		for {
			line, err := ch.Recv()
			if e := unreadable(line, err); e != nil {
				// JSON-RPC answers what it cannot read under null, as a
				// running chain does (badInput); then a real request may
				// still come, and gets the cause under its id.
				_ = ch.Send(wire.ErrorResponse(json.RawMessage("null"),
					wire.Errorf(e.Code, "%s; the chain could not start: %v", e.Message, cause)).Bytes())
				continue
			}
			var r requests
			switch big, ok := errors.AsType[*wire.OversizeError](err); {
			case ok:
				// Skipped, but a request all the same, as the relay
				// answers it (c.oversize); a batch's ids are not kept.
				if id := wire.ParseErrorID(big); id != nil {
					r.ids = append(r.ids, id)
				}
			case err != nil:
				return
			case wire.IsBatch(line):
				r.batch = true
				wire.EachElement(line, func(v []byte) {
					if id, ok := owed(v); ok {
						r.ids = append(r.ids, id)
					}
				})
			default:
				if id, ok := owed(line); ok {
					r.ids = append(r.ids, id)
				}
			}
			if len(r.ids) > 0 {
				first <- r
				return
			}
		}
	}()
	select {
	case r, ok := <-first:
		if ok {
			e := wire.Errorf(codeInternalError, "%v", cause)
			if component != "" {
				e = e.WithData(exitError{Component: component, Status: "did not start"})
			}
			answers := make([][]byte, len(r.ids))
			for i, id := range r.ids {
				answers[i] = wire.ErrorResponse(id, e).Bytes()
			}
			line := answers[0]
			if r.batch {
				line = slices.Concat([]byte("["), bytes.Join(answers, []byte(",")), []byte("]"))
			}
			_ = ch.Send(line)
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

// owed returns the id of line if line is a request, or would be one but for
// a flaw Parse names under its id (no "jsonrpc", say): a running chain
// answers either, the second with -32600, and a refusing one answers both
// with why the chain did not start, which is what the editor needs to show.
func owed(line []byte) (json.RawMessage, bool) {
	m, err := wire.Parse(line)
	if err != nil {
		id := wire.ParseErrorID(err)
		return id, id != nil
	}
	return m.ID, m.IsRequest()
}

// unreadable returns the error that answers line, read with err, when it
// is no message whose id could be read and the relay would answer it under
// null (badInput): -32700 for what is not JSON, -32600 for JSON that is no
// JSON-RPC message, or an empty batch. A notification, any other batch, a
// line too long to keep and the end of input are not unreadable.
func unreadable(line []byte, err error) *wire.Error {
	if err != nil {
		return nil
	}
	if wire.IsBatch(line) {
		n := 0
		wire.EachElement(line, func([]byte) { n++ })
		if n == 0 {
			return wire.Errorf(codeInvalidRequest, "empty batch")
		}
		return nil
	}
	_, perr := wire.Parse(line)
	if perr == nil || wire.ParseErrorID(perr) != nil {
		return nil
	}
	return wire.ParseError(perr)
}
