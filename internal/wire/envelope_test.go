package wire

import (
	"encoding/json"
	"testing"
)

// TestWrappedSize checks that a buffer of WrappedSize holds every envelope
// AppendWrapped makes, in each dialect, so that encoding one never grows it.
func TestWrappedSize(t *testing.T) {
	for _, d := range Dialects {
		for _, id := range []json.RawMessage{nil, json.RawMessage(`12345`), json.RawMessage(`"a-string-id"`)} {
			for _, params := range []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"sessionId":"s1"}`)} {
				envelope := d.Successor(id)
				got := AppendWrapped(nil, id, envelope, "session/cancel", params)
				if n := WrappedSize(id, envelope, "session/cancel", params); len(got) > n {
					t.Errorf("WrappedSize = %d, but AppendWrapped made %d bytes: %s", n, len(got), got)
				}
			}
		}
	}
}
