package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decodeAny decodes one JSON value as encoding/json does, numbers kept as
// their text.
func decodeAny(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// FuzzEditMember holds EditMember to encoding/json: for any valid JSON
// object (null and nothing count as {}) and valid value, the result reads
// as the object with that member set, keeps every other byte, and stays
// one line; what is not an object, or not JSON at all, is refused.
func FuzzEditMember(f *testing.F) {
	f.Add([]byte(`{"a":1, "b" : [1, 2] ,"c":3}`), "b", []byte(`"x"`))
	f.Add([]byte(`{"\u0061":1,"a":2}`), "a", []byte("[1,\n2]"))
	f.Add([]byte(` null `), "z", []byte(`{}`))
	f.Add([]byte(`{"\xff":1}`), "\ufffd", []byte(`2`))
	f.Add([]byte(`[]`), "a", []byte(`1`))
	f.Add([]byte(`{"a":1} x`), "a", []byte(`3`))
	f.Fuzz(func(t *testing.T, obj []byte, name string, val []byte) {
		if !json.Valid(val) {
			return
		}
		var old json.RawMessage
		out, err := EditMember(obj, name, func(o json.RawMessage) (json.RawMessage, error) {
			old = o
			return val, nil
		})
		if len(bytes.Trim(obj, " \t\r\n")) > 0 && !json.Valid(obj) {
			if err == nil {
				t.Fatalf("EditMember(%q), not JSON, = %s", obj, out)
			}
			return
		}
		// The member name stands for, as JSON spells it (see EditMember).
		key, _ := json.Marshal(name)
		json.Unmarshal(key, &name)
		ref := map[string]json.RawMessage{}
		if t := bytes.TrimSpace(obj); len(t) > 0 && string(t) != "null" {
			if json.Unmarshal(obj, &ref) != nil || ref == nil {
				ref = nil // not an object
			}
		}
		if ref == nil {
			if err == nil {
				t.Fatalf("EditMember(%s) of what is not an object = %s", obj, out)
			}
			return
		}
		if err != nil {
			t.Fatalf("EditMember(%s, %q, %s): %v", obj, name, val, err)
		}
		if want := ref[name]; !bytes.Equal(old, want) {
			t.Fatalf("EditMember(%s, %q) handed the edit %s, encoding/json reads %s", obj, name, old, want)
		}
		if !json.Valid(out) {
			t.Fatalf("EditMember(%s, %q, %s) = %s, not JSON", obj, name, val, out)
		}
		if !bytes.Contains(obj, []byte("\n")) && bytes.Contains(out, []byte("\n")) {
			t.Fatalf("EditMember(%s, %q, %s) = %q, more than a line", obj, name, val, out)
		}
		ref[name] = val
		want, _ := json.Marshal(ref)
		got, err := decodeAny(out)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := decodeAny(want)
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("EditMember(%s, %q, %s) = %s, want what reads as %s", obj, name, val, out, want)
		}
		// Every other byte is kept: what precedes the new value is obj's
		// own start, and what follows it obj's own end.
		if old != nil {
			i := bytes.LastIndex(obj, old)
			if i < 0 || !bytes.HasPrefix(out, obj[:i]) || !bytes.HasSuffix(out, obj[i+len(old):]) {
				t.Fatalf("EditMember(%s, %q, %s) = %s, which changed other bytes", obj, name, val, out)
			}
		}
	})
}

// FuzzProxyMarks: for any initialize params or answer, the Thinkwell
// dialect's mark reads back as a mark, MCP-over-ACP advertised reads back
// where its protocol version puts it, and nothing else changes.
func FuzzProxyMarks(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`))
	f.Add([]byte(`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"http":{}}}}}`))
	f.Add([]byte(`{"_meta":{"proxy":false,"symposium":null}}`))
	f.Add([]byte(`{"protocolVersion":2,"capabilities":{"session":true}}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return
		}
		if p, err := Thinkwell.InitializeParams(obj); err == nil {
			if !json.Valid(p) || !MarkedProxy(p) {
				t.Fatalf("InitializeParams(%s) = %s, not marked", obj, p)
			}
		}
		if p, err := RFD.InitializeParams(obj); err != nil || !bytes.Equal(p, obj) {
			t.Fatalf("RFD.InitializeParams(%s) = %s, %v", obj, p, err)
		}
		out, err := WithMCPOverACP(obj)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("WithMCPOverACP(%s) = %s", obj, out)
		}
		if IsV2(out) != IsV2(obj) {
			t.Fatalf("WithMCPOverACP(%s) = %s, of another version", obj, out)
		}
		caps := MCPCapabilities(out)
		switch {
		case !IsV2(obj):
			if string(Member(caps, "acp")) != "true" {
				t.Fatalf("WithMCPOverACP(%s) = %s: no acp: true", obj, out)
			}
		case bytes.Equal(out, obj):
			// a v2 agent without session capabilities is left alone
		case string(Member(caps, "acp")) != "{}":
			t.Fatalf("WithMCPOverACP(%s) = %s: no acp: {}", obj, out)
		}
	})
}

// FuzzBatch holds IsBatch and EachElement to encoding/json: a batch is a
// valid JSON array, and its elements are the values encoding/json finds.
func FuzzBatch(f *testing.F) {
	for _, s := range []string{`[{"a":1},{"b":[1,"]"]}]`, ` [ ] `, `[1,]`, `[1 2]`, `{"a":[1]}`, `["\"]",null]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var elems []json.RawMessage
		isArray := json.Unmarshal(line, &elems) == nil && bytes.TrimSpace(line)[0] == '['
		if got := IsBatch(line); got != isArray {
			t.Fatalf("IsBatch(%q) = %v, encoding/json reads an array: %v", line, got, isArray)
		}
		var got [][]byte
		EachElement(line, func(v []byte) { got = append(got, v) }) // must end, whatever line is
		if !isArray {
			return
		}
		if len(got) != len(elems) {
			t.Fatalf("EachElement(%s) = %q, encoding/json reads %q", line, got, elems)
		}
		for i := range elems {
			if !bytes.Equal(got[i], elems[i]) {
				t.Fatalf("EachElement(%s) element %d = %s, encoding/json reads %s", line, i, got[i], elems[i])
			}
		}
	})
}

// FuzzDialectOf holds what the dialects make of a method name to their
// table: a name is an envelope, a proxy initialize or an MCP-over-ACP
// method exactly when some dialect spells it so, and spelling its MCP
// method back in that dialect gives the name.
func FuzzDialectOf(f *testing.F) {
	for _, m := range []string{"proxy/successor", "_proxy/successor/request", "_proxy/initialize", "initialize", "_mcp/message", "mcp/connect", "", "p", "session/update", "_"} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, method string) {
		var envelope, proxyInit *Dialect
		var mcp string
		for _, d := range Dialects {
			if envelope == nil && (method == d.SuccessorRequest || method == d.SuccessorNotification) {
				envelope = d
			}
			if proxyInit == nil && !d.InitializeMeta && method == d.Initialize {
				proxyInit = d
			}
			for _, m := range []string{RFD.MCPConnect, RFD.MCPMessage, RFD.MCPDisconnect} {
				if d.SpellMCP(m) == method {
					mcp = m
				}
			}
		}
		if got := EnvelopeDialect(method); got != envelope || IsSuccessor(method) != (envelope != nil) {
			t.Fatalf("EnvelopeDialect(%q) = %v, the table says %v", method, got, envelope)
		}
		if got := ProxyInitDialect(method); got != proxyInit {
			t.Fatalf("ProxyInitDialect(%q) = %v, the table says %v", method, got, proxyInit)
		}
		if IsInitialize(method) != (proxyInit != nil || method == MethodInitialize) {
			t.Fatalf("IsInitialize(%q) = %v", method, IsInitialize(method))
		}
		got, ok := MCPMethod(method)
		if got != mcp || ok != (mcp != "") {
			t.Fatalf("MCPMethod(%q) = %q, %v; the table says %q", method, got, ok, mcp)
		}
		if ok {
			spelt := false
			for _, d := range Dialects {
				spelt = spelt || d.SpellMCP(got) == method
			}
			if !spelt {
				t.Fatalf("no dialect spells %q as %q", got, method)
			}
		}
	})
}
