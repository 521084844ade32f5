package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A proxy is initialized with proxy/initialize, which it answers only after
// initializing its successor: the answer it gives is the successor's, as the
// handler for "initialize" leaves it, plus the capability every proxy must
// declare.

// initializeHandler returns the handler for proxy/initialize: fn, or plain
// forwarding if there is none, with the answer made to advertise
// MCP-over-ACP, which the proxy-chains RFD requires of every proxy.
func initializeHandler(fn Handler) Handler {
	if fn == nil {
		fn = forward
	}
	return func(ctx context.Context, r *Request) (json.RawMessage, error) {
		result, err := fn(ctx, r)
		if err != nil {
			return nil, err
		}
		result, err = wire.WithMCPOverACP(result)
		if err != nil {
			return nil, fmt.Errorf("initialize result: %w", err)
		}
		if r.conn != nil && r.conn.getDialect().InitializeMeta {
			// The conductor checks that we took a proxy's part.
			if result, err = r.conn.getDialect().InitializeParams(result); err != nil {
				return nil, fmt.Errorf("initialize result: %w", err)
			}
		}
		return result, nil
	}
}

func forward(ctx context.Context, r *Request) (json.RawMessage, error) { return r.Forward(ctx) }
