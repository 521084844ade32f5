package conductor

import (
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// The chain, as the router sees it, is a line of positions:
//
//	0        the client (the editor, or the parent conductor in proxy mode)
//	1..n     the proxies, in order
//	n+1      the agent (agent mode), or the parent conductor's successor
//	         side (proxy mode): what the parent delivers in proxy/successor
//	         envelopes and what the conductor sends up in them
//
// A position has at most one predecessor (position-1) and one successor
// (position+1). Every rule of the proxy-chains RFD is a statement about
// which position a message goes to next and how it is dressed on arrival;
// this file states them, and nothing else in the package decides where a
// message goes.

// A role is what sits at a position.
type role int

const (
	roleClient   role = iota // position 0
	roleProxy                // positions 1..n
	roleAgent                // position n+1 in agent mode
	roleUpstream             // position n+1 in proxy mode: the parent, as our successor
)

// topology is the shape of one chain.
type topology struct {
	mode     Mode
	proxies  int
	bypassed []bool // by position: proxies taken out of the chain
}

func (t topology) last() int { return t.proxies + 1 }

func (t topology) role(pos int) role {
	switch {
	case pos == 0:
		return roleClient
	case pos <= t.proxies:
		return roleProxy
	case t.mode == ProxyMode:
		return roleUpstream
	default:
		return roleAgent
	}
}

// A delivery says how one request or notification goes on.
type delivery struct {
	to     int    // destination position
	wrap   bool   // deliver inside a successor envelope
	method string // the method the destination sees inside or without the envelope
}

// route decides where a request or notification goes next, given the
// position it came from, whether it arrived in a successor envelope (already
// unwrapped into method), and its method.
//
//   - A proxy's envelope goes to its successor; anything else it sends goes
//     to its predecessor.
//   - The client's messages go to position 1; in proxy mode, envelopes from
//     the parent come from its successor side (position n+1) and go to the
//     last proxy.
//   - The agent's messages go to the last proxy (or straight to the client).
//   - A message reaching a proxy from its successor is wrapped; one reaching
//     the parent's successor side is wrapped too; all others arrive plain.
//   - initialize becomes proxy/initialize for a proxy and initialize for the
//     agent or for the parent (which converts it in turn).
//   - A bypassed proxy is skipped, in either direction: its predecessor and
//     successor talk as if it had never been there.
func (t topology) route(from int, enveloped bool, method string) (delivery, *wire.Error) {
	var to int
	switch t.role(from) {
	case roleClient:
		if enveloped {
			if t.mode != ProxyMode {
				return delivery{}, wire.Errorf(codeMethodNotFound, "%s: the conductor is the final agent here and has no successor", method)
			}
			// The parent delivers what our successor sent: treat it as coming
			// from position n+1.
			return t.route(t.last(), false, method)
		}
		to = 1
	case roleProxy:
		if enveloped {
			to = from + 1
		} else {
			to = from - 1
		}
	case roleAgent, roleUpstream:
		if enveloped {
			return delivery{}, wire.Errorf(codeMethodNotFound, "%s: the agent has no successor", method)
		}
		to = from - 1
	}

	downstream := to > from
	for t.role(to) == roleProxy && to < len(t.bypassed) && t.bypassed[to] {
		if downstream {
			to++
		} else {
			to--
		}
	}
	d := delivery{to: to, method: method}
	switch t.role(to) {
	case roleProxy:
		d.wrap = !downstream
		if downstream && wire.IsInitialize(method) {
			d.method = wire.MethodProxyInitialize
		}
	case roleAgent:
		if wire.IsInitialize(method) {
			d.method = wire.MethodInitialize
		}
	case roleUpstream:
		d.wrap = true
		if wire.IsInitialize(method) {
			d.method = wire.MethodInitialize
		}
	case roleClient:
		// Position 0 of a proxy-mode conductor and the parent's successor
		// side are the same peer: a message travelling up from position 1
		// reaches the parent plain, exactly as an agent-mode client sees it.
	}
	return d, nil
}
