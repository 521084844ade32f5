package conductor

import (
	"encoding/json"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A cancel names a request by the id its sender gave it, and the conductor
// relays every request under an id of its own: a cancel that crosses it
// must name the request as its receiver saw it, in the receiver's own
// terms, or it cancels nothing (or another request).
//
//   - MCP's notifications/cancelled carried on a connection (mcp/message,
//     or a bridged client's own line) names the request by the sender's id:
//     mcpCancelled rewrites it to the relayed one, and drops a cancel for a
//     request no longer in flight, as MCP allows.
//   - To an owner that binds per request, it becomes ACP's $/cancel_request
//     for the mcp/message that carries the request (statelessCall), which is
//     how the TypeScript SDK's provider hears of it.
//   - ACP's $/cancel_request for a request to a bridged MCP client becomes
//     MCP's notifications/cancelled (cancelMethod): the client speaks MCP.
//   - A caller that ends its connection to a per-request owner (a bridged
//     client going away, an agent's mcp/disconnect) cancels what it still
//     has in flight there (cancelStateless, mcpxlate.go): a per-connection
//     owner hears mcp/disconnect instead.

// mcpCancelled returns the params of MCP's notifications/cancelled from
// `from` rewritten to name the id under which the conductor relayed the
// request, or false when that request is not in flight.
func mcpCancelled(from *peer, params json.RawMessage) (json.RawMessage, bool) {
	cl := from.inFlight(requestID(params))
	if cl == nil {
		from.unheeded("dropped an MCP cancel for a request not in flight", zap.ByteString("requestId", requestID(params)))
		return nil, false
	}
	out, err := wire.SetPath(params, []string{"requestId"}, wire.IntID(cl.id))
	return out, err == nil
}

// mcpCancelledOnConn is mcpCancelled for an mcp/message whose params carry
// the MCP message flattened: it reports true with params unchanged for any
// other carried method.
func mcpCancelledOnConn(from *peer, params json.RawMessage) (json.RawMessage, bool) {
	if method, _ := wire.Unquote(wire.Member(params, "method")); method != mcpMethodCancelled {
		return params, true
	}
	inner, ok := mcpCancelled(from, wire.Member(params, "params"))
	if !ok {
		return nil, false
	}
	out, err := wire.SetPath(params, []string{"params"}, inner)
	return out, err == nil
}

// cancelMethod is how a cancel reaches to: MCP's own notification for a
// bridged MCP client, ACP's for everyone else.
func cancelMethod(to *peer) string {
	if to.ends != nil {
		return mcpMethodCancelled
	}
	return wire.MethodCancelRequest
}

// cancelParams returns the params of a cancel for the request relayed as id.
func cancelParams(id int64) json.RawMessage {
	return append(append([]byte(`{"requestId":`), wire.IntID(id)...), '}')
}
