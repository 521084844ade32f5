package conductor

import (
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// onInitialize is the response hook of every initialize the conductor
// relays. It speaks the Rust SDK's dialect to a proxy that did not know
// proxy/initialize, notes what the final agent can do with MCP servers, and
// advertises MCP-over-ACP in every answer it passes on: to the editor or
// parent conductor, and to each proxy from its successor. The conductor
// bridges what the agent cannot do natively, so the claim holds whatever the
// agent supports.
func (c *chain) onInitialize(to *peer, d delivery, cl *call) func(*wire.Message) bool {
	return func(resp *wire.Message) bool {
		if c.retryInitialize(to, d, cl, resp) {
			return true
		}
		if resp.Error != nil {
			return false
		}
		if c.topo.Load().role(d.to) == roleAgent {
			c.mcp.agentCapabilities(resp.Result)
		}
		if r, err := wire.WithMCPOverACP(resp.Result); err == nil {
			resp.Result = r
		} else {
			to.log.Warn("initialize result is not an object; passed on unchanged", zap.Error(err))
		}
		switch {
		case cl.from == nil:
		case cl.from.pos == 0:
			c.stopInitTimer()
		case cl.from.proc() != nil:
			cl.from.rememberSuccessorInit(resp.Result) // for replaying it after a restart
		}
		return false
	}
}

// retryInitialize speaks the Rust SDK's dialect to a proxy that did not know
// proxy/initialize, and from then on to that proxy.
func (c *chain) retryInitialize(to *peer, d delivery, cl *call, resp *wire.Message) bool {
	if resp.Error != nil && cl.from != nil && cl.from.pos == 0 {
		c.stopInitTimer()
	}
	if resp.Error == nil || cl.method != wire.MethodProxyInitialize || errorCode(resp.Error) != codeMethodNotFound {
		return false
	}
	to.log.Info("proxy does not know proxy/initialize; retrying with the Rust SDK's _proxy/initialize")
	to.setDialect(dialectRust)
	d.method = wire.MethodProxyInitRust
	retry := &call{from: cl.from, fromID: cl.fromID, method: d.method, batch: cl.batch, params: cl.params}
	retry.onResponse = c.onInitialize(to, d, retry)
	c.forward(to, retry, d, cl.params)
	return true
}
