package trace

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzTraceRoundTrip records a request and its answer, of any params and
// body the relay may pass on, and reads the trace back as trace view
// does: two events, each with what its detail keeps. At full detail the
// params and the payload are the ones relayed; at metadata detail nothing
// of them is left but an error's numeric code.
func FuzzTraceRoundTrip(f *testing.F) {
	f.Add("session/prompt", []byte(`{"sessionId":"s","prompt":[{"text":"secret"}]}`), []byte(`{"code":-32000,"message":"secret","data":{"x":1}}`), true)
	f.Add("mcp/message", []byte(`{"connectionId":"c","method":"tools/call","params":{"secret":1}}`), []byte("{\n\"stopReason\": \"end_turn\"}"), false)
	f.Add("_x", []byte(`[1, 2]`), []byte(`{"code":"-1","message":"m"}`), true)
	f.Fuzz(func(t *testing.T, method string, params, body []byte, isError bool) {
		if !json.Valid(params) || !json.Valid(body) {
			return // the relay passes on only valid JSON
		}
		for _, detail := range Details {
			var out bytes.Buffer
			r := NewRecorder(&out, Options{Detail: detail})
			r.Send("client", "agent", json.RawMessage(`1`), method, params, false)
			r.Reply("agent", "client", json.RawMessage(`1`), body, isError)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			events, err := ReadEvents(&out)
			if err != nil || len(events) != 2 {
				t.Fatalf("read back %d events, %v, from %q", len(events), err, out.Bytes())
			}
			var req, resp Event
			if json.Unmarshal(events[0], &req) != nil || json.Unmarshal(events[1], &resp) != nil {
				t.Fatalf("events %q", events)
			}
			if req.Type != TypeRequest || resp.Type != TypeResponse || resp.IsError == nil || *resp.IsError != isError {
				t.Fatalf("events %q", events)
			}
			if detail == Full {
				if method != "mcp/message" && !sameJSON(req.Params, params) || !sameJSON(resp.Payload, body) {
					t.Fatalf("full trace of %s / %s: %q", params, body, events)
				}
				continue
			}
			want := "null"
			if isError {
				var e map[string]json.RawMessage
				if json.Unmarshal(body, &e) == nil && e != nil && e["code"] != nil {
					want = `{"code":null}`
					if _, err := strconv.ParseInt(string(e["code"]), 10, 64); err == nil {
						want = `{"code":` + string(e["code"]) + `}`
					}
				}
			}
			if string(req.Params) != "null" || string(resp.Payload) != want {
				t.Fatalf("metadata trace of %s / %s keeps %s / %s", params, body, req.Params, resp.Payload)
			}
		}
	})
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}
