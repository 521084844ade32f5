package mcpbridge

import (
	"net/http"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// keepAliveInterval spaces SSE comments on a quiet stream, so that clients
// with a read timeout (undici's is five minutes) do not drop it.
var keepAliveInterval = 25 * time.Second

// respond writes st as the response to r until st is done or the client goes
// away, then releases it. A GET stream starts at once; a POST's SSE stream
// starts with its first message, so that a lone error response can still
// get an HTTP status. It reports whether st answered a failed initialize.
func (t *httpTransport) respond(w http.ResponseWriter, r *http.Request, s *session, st *stream) (failedInit bool) {
	rc := http.NewResponseController(w)
	started := false
	start := func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		started = true
	}
	var keepAlive <-chan time.Time
	if st.sse {
		tick := time.NewTicker(keepAliveInterval)
		defer tick.Stop()
		keepAlive = tick.C
	}
	if st.get {
		start()
		if rc.Flush() != nil {
			s.release(st, true)
			return false
		}
	}

	var body []outgoing // JSON mode collects the responses
	for {
		out, done := s.take(st)
		if !st.sse {
			body = append(body, out...)
		} else if len(out) > 0 {
			if !started && done && len(out) == 1 {
				if status := errorStatus(st.protocol, out[0].data); status != 0 {
					writeJSON(w, status, out[0].data)
					s.release(st, false)
					return st.failedInit
				}
			}
			if !started {
				start()
			}
			buf := make([]byte, 0, 512)
			for _, m := range out {
				buf = appendEvent(buf, m.data)
			}
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				s.release(st, true)
				return false
			}
		}
		if done {
			if !st.sse {
				writeJSONBody(w, st, body)
			} else if !started {
				start() // ended with nothing to say: an empty stream
			}
			s.release(st, false)
			return st.failedInit
		}
		select {
		case <-st.wake:
		case <-keepAlive:
			if !started {
				start()
			}
			if _, err := w.Write([]byte(":\n\n")); err != nil || rc.Flush() != nil {
				s.release(st, true)
				return false
			}
		case <-r.Context().Done():
			s.release(st, true)
			return false
		}
	}
}

// appendEvent appends msg, which is on one line, as an SSE message event.
func appendEvent(buf, msg []byte) []byte {
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, msg...)
	return append(buf, "\n\n"...)
}

// writeJSONBody writes the responses to a POST as one JSON body: an array
// for a batch, else the one response.
func writeJSONBody(w http.ResponseWriter, st *stream, out []outgoing) {
	if !st.batch && len(out) == 1 {
		status := errorStatus(st.protocol, out[0].data)
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, out[0].data)
		return
	}
	buf := []byte{'['}
	for i, m := range out {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, m.data...)
	}
	writeJSON(w, http.StatusOK, append(buf, ']'))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// protocol2026 is the first MCP revision whose HTTP transport gives some
// errors a status of their own.
const protocol2026 = "2026-07-28"

// errorStatus returns the HTTP status that MCP from revision 2026-07-28
// requires for a request that failed with resp, or 0 for the usual 200.
func errorStatus(protocol string, resp []byte) int {
	if protocol < protocol2026 { // revisions are dates, so they sort as strings
		return 0
	}
	m, err := wire.Parse(resp)
	if err != nil || m.Error == nil {
		return 0
	}
	// Read as Parse checks it: -32601.0 is method-not-found too.
	code, _, _, ok := wire.ReadError(m.Error)
	if !ok {
		return 0
	}
	switch code {
	case -32601: // method not found
		return http.StatusNotFound
	case -32602, -32022, -32021: // invalid params, unsupported version, missing capability
		return http.StatusBadRequest
	}
	return 0
}
