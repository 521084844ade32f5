package conductor

import (
	"encoding/json"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// In the request binding an owner reports on a call (progress,
// subscription events) with mcp/message notifications that name the call
// by its serverId and requestId, and sends them on the connection the call
// reached it by. The conductor relays calls from several callers to the
// same owner (the agent, a proxy calling a server the editor or an earlier
// proxy declared, the editor calling a proxy's), straight or hop by hop,
// so it remembers, for each call in flight, which position made it and
// which peer it asked: a notification from that peer naming the call goes
// back to its caller (mcpFromServer, topology.toCaller), ahead of the
// answer as it came. The entry is forgotten when the answer passes or the
// call fails, when its server's last session ends (endLocked), and when
// its caller or the peer asked is restarted or bypassed (dropOwner).

// A callRef names a call as the peer asked knows it: by the peer's
// position and the call's key (callKey).
type callRef struct {
	asked int
	key   string
}

// An mcpCall is a request-binding call in flight.
type mcpCall struct {
	caller   int    // the position it came from
	serverID string // the server it names, for the end of its sessions
	cl       *call  // as relayed: only its own end forgets the entry
}

// callKey returns the key by which the TypeScript SDK tells calls apart,
// JSON.stringify([serverId, requestId]): by value, not spelling, so that
// "r1" and "r\u0031", 7 and 7.0, -0 and 0 name one call. ok is false if
// either is missing or is no JSON value JavaScript reads as one.
func callKey(serverID, requestID json.RawMessage) (key string, ok bool) {
	if serverID == nil || requestID == nil {
		return "", false
	}
	var v [2]any
	if json.Unmarshal(serverID, &v[0]) != nil || json.Unmarshal(requestID, &v[1]) != nil {
		return "", false
	}
	for i := range v {
		if f, isNum := v[i].(float64); isNum && f == 0 {
			v[i] = 0.0 // JSON.stringify(-0) is "0"
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// noteCall records cl, which relays the request-binding call in params
// from the position caller to the peer at asked, until its answer. It
// returns cl's response hook: one that forgets the call and then runs
// next (which may be nil), or next itself for params that name no call.
// A second call under a key in flight to the same peer is not recorded:
// the first keeps its notifications (an SDK owner refuses the second).
func (r *mcpRoutes) noteCall(caller, asked int, params json.RawMessage, cl *call, next func(*wire.Message) bool) func(*wire.Message) bool {
	key, ok := callKey(wire.Member(params, "serverId"), wire.Member(params, "requestId"))
	if !ok {
		return next
	}
	ref := callRef{asked, key}
	var serverID string
	_ = json.Unmarshal(wire.Member(params, "serverId"), &serverID) // "" if not a string: no session ends it
	r.mu.Lock()
	if _, busy := r.calls[ref]; busy {
		r.mu.Unlock()
		return next
	}
	r.calls[ref] = mcpCall{caller: caller, serverID: serverID, cl: cl}
	r.mu.Unlock()
	return func(resp *wire.Message) bool {
		r.mu.Lock()
		if r.calls[ref].cl == cl {
			delete(r.calls, ref)
		}
		r.mu.Unlock()
		if next != nil {
			return next(resp)
		}
		return false
	}
}

// callerOf returns the position that made the call the peer at asked is
// notifying about in params, if the call is in flight.
func (r *mcpRoutes) callerOf(asked int, params json.RawMessage) (int, bool) {
	key, ok := callKey(wire.Member(params, "serverId"), wire.Member(params, "requestId"))
	if !ok {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.calls[callRef{asked, key}]
	return c.caller, ok
}

// forgetCallsLocked forgets the calls for which drop reports true.
func (r *mcpRoutes) forgetCallsLocked(drop func(callRef, mcpCall) bool) {
	for ref, c := range r.calls {
		if drop(ref, c) {
			delete(r.calls, ref)
		}
	}
}
