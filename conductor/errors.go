package conductor

import (
	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// JSON-RPC codes the conductor answers with. The standard ones come from
// jrpc2; -32800 is ACP's request-cancelled code; -33001 is MCP-over-ACP's
// "server unavailable".
const (
	codeInvalidRequest = jrpc2.InvalidRequest
	codeMethodNotFound = jrpc2.MethodNotFound
	codeInvalidParams  = jrpc2.InvalidParams
	codeInternalError  = jrpc2.InternalError
	codeCancelled      = wire.CodeRequestCancelled

	codeMCPServerUnavailable = jrpc2.Code(-33001)
)

// errCancelled answers a cancelled request the conductor answers itself,
// as ACP's request-cancellation RFD words it and the proxy library does.
var errCancelled = wire.Errorf(codeCancelled, "Request cancelled")
