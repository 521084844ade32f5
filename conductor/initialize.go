package conductor

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// onInitialize is the response hook of every initialize the conductor
// relays. It speaks the Rust SDK's dialect to a proxy that did not know
// proxy/initialize, notes what the final agent can do with MCP servers, and
// advertises MCP-over-ACP in every answer it passes on: to the editor or
// parent conductor, and to each proxy from its successor. The conductor
// bridges what the agent cannot do natively, so the claim holds unless the
// agent (a v2 one, whose every transport is opt-in) can take no server
// over any transport the bridge may use, or a v2 parent made no such
// claim to us: then nothing is claimed, not to the proxies either, whose
// own acp servers would need the bridge as much. A v2 answer a proxy gives
// before the terminal has answered claims nothing either: the agent's
// transports are unknown, and a claim that turns out false would cost the
// editor its servers with only the log saying so.
func (c *chain) onInitialize(to *peer, d delivery, cl *call) func(*wire.Message) bool {
	return c.onInitializeAfter(to, d, cl, nil)
}

// onInitializeAfter is onInitialize for a retry: refused names the
// initialize methods the proxy refused before cl's.
func (c *chain) onInitializeAfter(to *peer, d delivery, cl *call, refused []string) func(*wire.Message) bool {
	return func(resp *wire.Message) bool {
		if c.retryInitialize(to, d, cl, resp, refused) {
			return true
		}
		if resp.Error != nil {
			return false
		}
		if cl.dialect != nil && cl.dialect.InitializeMeta && !wire.MarkedProxy(resp.Result) {
			// It took initialize as an agent would: it is no proxy.
			resp.Result, resp.Error = nil, wire.Errorf(codeInternalError,
				"component %q is not an ACP proxy: it refused proxy/initialize and _proxy/initialize, and answered initialize without _meta.proxy", to.name).Encode()
			return false
		}
		if cl.dialect != nil {
			to.rememberInit(cl.params) // a proxy took them: a restart replays them
		}
		switch c.topo.Load().role(d.to) {
		case roleAgent:
			c.mcp.agentCapabilities(resp.Result)
			c.mcp.servable(c.mcp.agentIsNative() || c.bridge != nil && c.bridge.reaches(c.mcp))
		case roleUpstream:
			// The parent bridges for us; a v2 parent that can serve acp
			// servers says so, a v1 one always can (stdio is built in).
			c.mcp.servable(!wire.IsV2(resp.Result) || wire.HasMCPOverACP(resp.Result))
		}
		// Claimed only where something can serve it: an editor or a proxy
		// that declares an acp server the agent cannot be given would get
		// a session without it, and only the log would say so.
		if why := c.mcp.unservableWhy(wire.IsV2(resp.Result)); why != "" {
			// Once: it holds for every answer passed on, one for each
			// proxy and the client's.
			c.unadvertisedOnce.Do(func() {
				to.log.Warn("MCP-over-ACP not advertised: " + why)
			})
		} else if r, err := wire.WithMCPOverACP(resp.Result); err == nil {
			resp.Result = r
		} else {
			to.log.Warn("initialize result is not an object; passed on unchanged", zap.Error(err))
		}
		if cl.from != nil && cl.from.pos == 0 && cl.from.getDialect().InitializeMeta {
			// A parent of the Thinkwell dialect checks that we took the
			// proxy's part.
			if r, err := wire.Thinkwell.InitializeParams(resp.Result); err == nil {
				resp.Result = r
			}
		}
		switch {
		case cl.from == nil:
		case cl.from.pos == 0:
			c.stopInitTimer()
		case cl.from.proc() != nil:
			cl.from.rememberSuccessorInit(cl.params, resp.Result) // for replaying it after a restart
		}
		return false
	}
}

// retryInitialize tries the next dialect (wire.Dialects) on a proxy that
// refused its initialize with method-not-found, and speaks that dialect to
// it from then on. A proxy that passed the initialize on to its successor
// took it: the refusal is the successor's (an agent that knows no
// initialize), and goes back as it is. A proxy that refused every dialect
// does not act as one, and the refusal that goes back says so, naming it,
// with the last refusal as its data: a bare method-not-found would leave
// the editor to guess which component knew no initialize.
func (c *chain) retryInitialize(to *peer, d delivery, cl *call, resp *wire.Message, refused []string) bool {
	if resp.Error != nil && cl.from != nil && cl.from.pos == 0 {
		c.stopInitTimer()
	}
	if resp.Error == nil || cl.dialect == nil || errorCode(resp.Error) != codeMethodNotFound || to.passedInit.Load() {
		return false
	}
	refused = append(refused[:len(refused):len(refused)], cl.method)
	next := cl.dialect.Next()
	if next == nil {
		resp.Error = errNotAProxy(to.name, refused, resp.Error).Encode()
		return false
	}
	to.log.Info("proxy refused its initialize; retrying in the next dialect",
		zap.String("refused", cl.method), zap.String("dialect", next.Name))
	to.setDialect(next)
	d.method = next.Initialize
	params, err := next.InitializeParams(cl.params)
	if err != nil {
		return false // the refusal goes back as it is
	}
	retry := &call{from: cl.from, fromID: cl.fromID, method: d.method, batch: cl.batch, params: cl.params, dialect: next}
	retry.onResponse = c.onInitializeAfter(to, d, retry, refused)
	if to.trace != nil {
		// The refusal went to the conductor, which asks again itself:
		// recorded so, before the retry goes.
		cl.takeAnswer(resp.Result, resp.Error)
		retry.markTaken()
	}
	c.relayCall(to, retry, d, params)
	return true
}

// errNotAProxy is the error for a component in a proxy's place that refused
// the initialize methods refused, the last with the error object last.
func errNotAProxy(name string, refused []string, last json.RawMessage) *wire.Error {
	said := make([]string, len(refused))
	for i, m := range refused {
		said[i] = m
		if m == wire.MethodInitialize {
			said[i] = m + " marked _meta.proxy"
		}
	}
	list := said[len(said)-1]
	if n := len(said); n > 1 {
		list = strings.Join(said[:n-1], ", ") + " and " + list
	}
	return &wire.Error{
		Code:    codeInternalError,
		Message: fmt.Sprintf("proxy %q refused %s: it does not act as an ACP proxy (is it an agent?)", name, list),
		Data:    last,
	}
}

// resendInitialize sends cl, an initialize request that was pending on a
// proxy that failed and was bypassed, on to where route now sends it, as
// a new call whose answer its caller gets; report is how cl's own hop
// ended, for the trace. One its caller cancelled since is not sent: the
// cancel answered it (see peer.cancelInit).
func (c *chain) resendInitialize(cl *call, report *wire.Error) {
	cl.to.resendHeld(cl, func() { c.sendOn(cl, report) })
}

// sendOn is resendInitialize's sending, under the bypassed proxy's hold
// of cl (see peer.resendHeld).
func (c *chain) sendOn(cl *call, report *wire.Error) {
	traced := cl.to.trace != nil
	if traced {
		// As a retry's (retryInitialize): the conductor takes the hop's
		// end and asks again itself, and what the caller gets is its
		// answer to the caller's request to the conductor.
		cl.takeFailed(report.Encode())
	}
	dc := c.topo.Load().resend(cl.from.pos, c)
	if dc.act == actRefuse {
		// take, not done: a bypass may run on a timer's goroutine, which
		// the shutdown does not wait for.
		if cl.take() {
			if traced {
				cl.traceCallerAnswer(nil, dc.err.Encode())
			}
			cl.answer(encodeError(cl.fromID, dc.err))
			cl.told()
		}
		return
	}
	to := c.peers[dc.d.to]
	cl.from.log.Info("sending initialize on past a bypassed proxy", zap.String("to", to.name))
	next := &call{from: cl.from, method: dc.d.method, batch: cl.batch, params: cl.params, dialect: dc.proxyInit}
	next.onResponse = c.onInitialize(to, dc.d, next)
	params := cl.params
	if dc.initTimer {
		c.startInitTimer() // the successor gets its own time to answer
	}
	if dc.proxyInit != nil {
		var err error
		if params, err = dc.proxyInit.InitializeParams(params); err != nil {
			if cl.take() {
				e := wire.Errorf(codeInvalidParams, "%s: %v", dc.d.method, err)
				if traced {
					cl.traceCallerAnswer(nil, e.Encode())
				}
				cl.answer(encodeError(cl.fromID, e))
				cl.told()
			}
			return
		}
	}
	next.to, next.id = to, to.nextID.Add(1)
	next.fromID = append(next.idBuf[:0], cl.fromID...)
	// next takes cl's place among its caller's requests at once: with no
	// moment between them, a cancel by their id finds one or the other.
	if ok, e := cl.from.retrack(cl, next); !ok {
		if e != nil {
			if traced {
				cl.traceCallerAnswer(nil, e.Encode())
			}
			cl.answer(encodeError(cl.fromID, e)) // the conductor is stopping
			cl.told()
		}
		return // or its caller's process was restarted since
	}
	own := false
	if traced {
		// As relayCall's: should to's closed outbox drop it, or to be
		// gone before it is sent, the answer is the conductor's.
		own = next.notSent(params)
		next.markTaken() // the conductor's own request, as a retry is
	}
	if err := to.register(next); err != nil {
		failCalls([]*call{next}, goneError(to, err)) // its hook, if any, sees the failure
		return
	}
	c.relayFor(next, own, cl.from, to, wire.IntID(next.id), dc.d, params)
}
