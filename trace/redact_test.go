package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRedact: a secret Redact was told is written as [redacted] wherever
// it stands as a word in a string of what is recorded (a declaration's
// env value, a bearer header, a message that quotes it after a JSON
// escape), in the file and the live stream, and the rest of the message
// is unchanged. A word that only holds the secret is not it, and a number
// is never touched.
func TestRedact(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct{ in, want string }{
		{`{"env":[{"name":"T","value":"` + tok + `"}]}`, `{"env":[{"name":"T","value":"[redacted]"}]}`},
		{`{"headers":[{"name":"Authorization","value":"Bearer ` + tok + `"}]}`, `{"headers":[{"name":"Authorization","value":"Bearer [redacted]"}]}`},
		{`{"text":"{\"value\":\"` + tok + `\"}\n` + tok + `.\u003c` + tok + `"}`, `{"text":"{\"value\":\"[redacted]\"}\n[redacted].\u003c[redacted]"}`},
		{`{"a":"x` + tok + `","b":"` + tok + `-1"}`, `{"a":"x` + tok + `","b":"` + tok + `-1"}`},
		{`{"n":1234567890123456}`, `{"n":1234567890123456}`},
	} {
		hub := NewHub(0)
		var out bytes.Buffer
		r := NewRecorder(&out, Options{Live: hub})
		r.Redact(tok)
		r.Redact("1234567890123456")
		r.Send("client", "agent", json.RawMessage("1"), "session/new", json.RawMessage(tc.in), false)
		r.Reply("agent", "client", json.RawMessage("1"), json.RawMessage(tc.in), true)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		live, _ := hub.Snapshot()
		for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			got := string(e.Params) + string(e.Payload)
			if got != tc.want || e.Bytes != len(tc.in) {
				t.Errorf("%s recorded as %s (%d bytes), want %s (%d)", tc.in, got, e.Bytes, tc.want, len(tc.in))
			}
			if string(live[i])+"\n" != line+"\n" {
				t.Errorf("the live viewer got %s, the file %s", live[i], line)
			}
		}
	}
}

// TestRedactOnlyWords: Redact refuses what it could not find with an
// error that names the package and does not hold the secret, without
// panicking, and the Recorder goes on as before.
func TestRedactOnlyWords(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, Options{})
	for _, s := range []string{"", "short", "0123456789abcdef 0123456789abcdef", "0123456789abcdef.0123"} {
		err := r.Redact(s)
		if err == nil || !strings.HasPrefix(err.Error(), "trace: Redact: ") || (s != "" && strings.Contains(err.Error(), s)) {
			t.Errorf("Redact(%q) = %v, want an error naming trace and not the secret", s, err)
		}
	}
	if err := r.Redact("0123456789abcdef"); err != nil {
		t.Errorf("Redact of a word: %v", err)
	}
	r.Send("client", "agent", json.RawMessage("1"), "x", json.RawMessage(`{"a":"short 0123456789abcdef"}`), false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, `"short [redacted]"`) {
		t.Errorf("recorded %s, want the word redacted and the rest as it was", got)
	}
	var nilRec *Recorder
	if err := nilRec.Redact("no trace, nothing to do"); err != nil {
		t.Errorf("nil Recorder: %v", err)
	}
}

// FuzzRedact: what redact leaves of JSON is JSON (it looks in strings
// only, and steps over their escapes), and JSON that holds no secret is
// left as it was.
func FuzzRedact(f *testing.F) {
	const tok = "0123456789abcdef0123456789abcdef"
	for _, s := range []string{`"` + tok + `"`, `{"a":"\"` + tok + `\\"}`, `["\u0041` + tok + `", 1234567890123456]`, `"\\` + tok + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		var s secretSet
		s.add(tok)
		s.add("1234567890123456")
		out := s.redact([]byte(in))
		if !json.Valid(out) {
			t.Fatalf("%s redacted to %s, not JSON", in, out)
		}
		if !strings.Contains(in, tok) && !strings.Contains(in, "1234567890123456") && string(out) != in {
			t.Fatalf("%s, which holds no secret, redacted to %s", in, out)
		}
	})
}
