package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzSetPath holds SetPath to encoding/json: for any valid object (null
// and nothing count as {}) and a path of one to three names, the result
// reads as the object with the value set there, objects made on the way;
// what is not an object on the way is refused. The path is a dotted name.
func FuzzSetPath(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`), "agentCapabilities.mcpCapabilities.acp", []byte(`true`))
	f.Add([]byte(`{"sessionId":"s","_meta":{"a":1}}`), "_meta.sessionId", []byte(`"x"`))
	f.Add([]byte(`{"requestId":"a\"b","x":[1]}`), "requestId", []byte(`7`))
	f.Add([]byte(`{"a":{"b":1},"a":{"c":2}}`), "a.c", []byte(`3`))
	f.Add([]byte(`{"a":1}`), "a.b", []byte(`{}`))
	f.Add([]byte(`null`), "a.b.c", []byte("[1,\n2]"))
	f.Fuzz(func(t *testing.T, obj []byte, dotted string, val []byte) {
		path := strings.Split(dotted, ".")
		if len(path) > 3 || !json.Valid(val) || len(bytes.Trim(obj, jsonSpace)) > 0 && !json.Valid(obj) {
			return
		}
		out, err := SetPath(obj, path, val)
		// What the result must read as, built with encoding/json.
		want, ok := setRef(obj, path, val)
		if !ok {
			if err == nil {
				t.Fatalf("SetPath(%s, %q) through what is not an object = %s", obj, path, out)
			}
			return
		}
		if err != nil {
			t.Fatalf("SetPath(%s, %q, %s): %v", obj, path, val, err)
		}
		if !json.Valid(out) {
			t.Fatalf("SetPath(%s, %q, %s) = %s, not JSON", obj, path, val, out)
		}
		if !bytes.Contains(obj, []byte("\n")) && bytes.Contains(out, []byte("\n")) {
			t.Fatalf("SetPath(%s, %q, %s) = %q, more than a line", obj, path, val, out)
		}
		got, err := decodeAny(out)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("SetPath(%s, %q, %s) = %s, want what reads as %v", obj, path, val, out, want)
		}
	})
}

// setRef is SetPath done with encoding/json; ok is false where the path
// goes through what is not an object.
func setRef(obj []byte, path []string, val []byte) (any, bool) {
	var m map[string]any
	if t := bytes.Trim(obj, jsonSpace); len(t) > 0 && string(t) != "null" {
		v, err := decodeAny(obj)
		if err != nil {
			return nil, false
		}
		if m, _ = v.(map[string]any); m == nil {
			return nil, false
		}
	} else {
		m = map[string]any{}
	}
	name := path[0]
	key, _ := json.Marshal(name) // the name as JSON spells it
	json.Unmarshal(key, &name)
	if len(path) == 1 {
		m[name], _ = decodeAny(val)
		return m, true
	}
	var inner []byte
	if old, ok := m[name]; ok {
		inner, _ = json.Marshal(old)
	}
	v, ok := setRef(inner, path[1:], val)
	if !ok {
		return nil, false
	}
	m[name] = v
	// Numbers come back as json.Number: read the whole again as decodeAny
	// reads a result.
	b, _ := json.Marshal(m)
	r, _ := decodeAny(b)
	return r, true
}

// FuzzReadError holds ReadError to encoding/json, and to Parse: for any
// valid JSON, it reads the code, message and data encoding/json finds
// (escaped names decoded, the last of repeated names counting), ok exactly
// when the code has an integer value and the message is a string; and a
// response carrying it is malformed exactly when ok is false.
func FuzzReadError(f *testing.F) {
	for _, s := range []string{
		`{"code":-32601,"message":"Method not found"}`,
		`{"code":-32603,"message":"m","data":{"x":[1]}}`,
		`{"code":1.0,"message":"x","c\u006fde":2e0}`,
		`{"code":1.5,"message":"x"}`, `{"code":1e19,"message":"x"}`, `{"code":-1e400,"message":"x"}`,
		`{"code":"1","message":"x"}`, `{"code":1,"message":null}`, `{"code":1}`,
		`{"code":1,"message":"a\u00e9\"","data":1,"d\u0061ta":2}`, `[]`, `null`, `"x"`,
		`{"code":9223372036854775808,"message":""}`, `{"code":-9223372036854775809,"message":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		code, msg, data, ok := ReadError(raw)
		var ref map[string]json.RawMessage
		wantOK := json.Unmarshal(raw, &ref) == nil && ref != nil
		var wantMsg string
		var f float64
		if wantOK {
			c := bytes.TrimSpace(ref["code"])
			wantOK = len(c) > 0 && (c[0] == '-' || c[0] >= '0' && c[0] <= '9')
			if wantOK {
				var err error
				f, err = strconv.ParseFloat(string(c), 64)
				wantOK = err == nil && f == math.Trunc(f)
			}
			wantOK = wantOK && json.Unmarshal(ref["message"], &wantMsg) == nil && bytes.HasPrefix(ref["message"], []byte(`"`))
		}
		if ok != wantOK {
			t.Fatalf("ReadError(%s) ok = %v, encoding/json reads %v", raw, ok, wantOK)
		}
		if line := []byte(`{"jsonrpc":"2.0","id":1,"error":` + string(raw) + `}`); string(raw) != "null" {
			if m, err := Parse(line); err != nil || m.MalformedError() == ok {
				t.Fatalf("Parse(%s) = malformed %v, %v; ReadError ok = %v", line, m != nil && m.MalformedError(), err, ok)
			}
		}
		if !ok {
			return
		}
		if msg != wantMsg {
			t.Fatalf("ReadError(%s) message = %q, want %q", raw, msg, wantMsg)
		}
		if !bytes.Equal(data, ref["data"]) {
			t.Fatalf("ReadError(%s) data = %s, want %s", raw, data, ref["data"])
		}
		wantCode, err := strconv.ParseInt(string(bytes.TrimSpace(ref["code"])), 10, 64)
		if err != nil {
			switch {
			case f >= 0x1p63:
				wantCode = math.MaxInt64
			case f < -0x1p63:
				wantCode = math.MinInt64
			default:
				wantCode = int64(f)
			}
		}
		if code != wantCode {
			t.Fatalf("ReadError(%s) code = %d, want %d", raw, code, wantCode)
		}
	})
}

// FuzzUnquote holds Unquote to encoding/json for every value as Member
// and Parse cut it, which is what every caller hands it: a string decodes
// as encoding/json decodes it, anything else is no string.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"session/prompt"`, `"a\"b"`, `"\u00e9\ud800"`, "\"\xff\xfe\"", `""`, `1`, `null`, `["a"]`, `"\/"`, ` "" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		obj := []byte(`{"k":` + string(v) + `}`)
		if !json.Valid(obj) {
			return
		}
		v = Member(obj, "k")
		s, ok := Unquote(v)
		var want string
		wantOK := v[0] == '"' && json.Unmarshal(v, &want) == nil
		if ok != wantOK || s != want {
			t.Fatalf("Unquote(%q) = %q, %v; encoding/json reads %q, %v", v, s, ok, want, wantOK)
		}
	})
}

// FuzzRefuseBatch: the refusal of an over-long batch is a JSON array of
// one valid error response for each request the scan kept, under its id,
// in order, and one under null if some were not kept; nothing when there
// is none. The entries are those the streaming scan finds in data.
func FuzzRefuseBatch(f *testing.F) {
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"id":"x\"","method":"b"},{"id":3,"result":{}}]`), true)
	f.Add([]byte(`[{"id":{"a":1},"method":"b"}, {"id" : -1.5e3 , "method":"c"}]`), false)
	f.Add([]byte(`[{"method":"n"}]`), true)
	f.Fuzz(func(t *testing.T, data []byte, withUnkept bool) {
		var s memberScan
		s.feed(data)
		entries := s.entries()
		var unkept *Error
		if withUnkept {
			unkept = Errorf(-32600, "unkept")
		}
		out := RefuseBatch(entries, Errorf(-32600, "too long"), unkept)
		var want []json.RawMessage
		for _, e := range entries {
			if !e.IsResponse {
				want = append(want, e.ID)
			}
		}
		if unkept != nil {
			want = append(want, json.RawMessage("null"))
		}
		if len(want) == 0 {
			if out != nil {
				t.Fatalf("RefuseBatch(%v) = %s, want nothing", entries, out)
			}
			return
		}
		var got []json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("RefuseBatch(%v) = %s: %v", entries, out, err)
		}
		if len(got) != len(want) {
			t.Fatalf("RefuseBatch(%v) = %s, want %d answers", entries, out, len(want))
		}
		for i, a := range got {
			m, err := Parse(a)
			if err != nil || !m.IsResponse() || m.MalformedError() || m.Error == nil {
				t.Fatalf("answer %d, %s, is no error response: %v", i, a, err)
			}
			if !SameID(m.ID, want[i]) {
				t.Fatalf("answer %d is to %s, want %s", i, m.ID, want[i])
			}
		}
	})
}

// FuzzMCPCapabilities holds what an InitializeResponse is read to say of
// MCP-over-ACP to encoding/json: its version (a whole number, 2 or more,
// is v2), the capabilities where that version puts them, and whether acp
// is claimed; and after WithMCPOverACP, a claim that reads back.
func FuzzMCPCapabilities(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"http":true,"acp":false}}}`))
	f.Add([]byte(`{"protocolVersion":2.0,"capabilities":{"session":{"mcp":{"acp":{},"stdio":{}}}}}`))
	f.Add([]byte(`{"protocolVersion":2e0,"capabilities":{"session":{}},"protocolVersion":1}`))
	f.Add([]byte(`{"protocolV\u0065rsion":3,"capabilities":{"session":{"mcp":{"acp":null}}}}`))
	f.Add([]byte(`{"protocolVersion":2.5,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		if !json.Valid(result) {
			return
		}
		// Maps, not structs: encoding/json matches struct fields
		// case-insensitively. A wrong shape on the way means nothing is
		// there.
		obj := func(raw json.RawMessage) map[string]json.RawMessage {
			var m map[string]json.RawMessage
			json.Unmarshal(raw, &m)
			return m
		}
		top := obj(result)
		var v float64
		v2 := top["protocolVersion"] != nil && json.Unmarshal(top["protocolVersion"], &v) == nil && v >= 2 && v == math.Trunc(v)
		if IsV2(result) != v2 {
			t.Fatalf("IsV2(%s) = %v, encoding/json reads %v", result, IsV2(result), v2)
		}
		want := obj(top["agentCapabilities"])["mcpCapabilities"]
		if v2 {
			want = obj(obj(top["capabilities"])["session"])["mcp"]
		}
		caps := MCPCapabilities(result)
		if !bytes.Equal(caps, want) {
			t.Fatalf("MCPCapabilities(%s) = %s, want %s", result, caps, want)
		}
		acp := string(obj(want)["acp"])
		has := acp != "" && acp != "false" && acp != "null"
		if HasMCPOverACP(result) != has {
			t.Fatalf("HasMCPOverACP(%s) = %v, want %v", result, !has, has)
		}
		out, err := WithMCPOverACP(result)
		if err != nil || bytes.Equal(out, result) {
			return // not an object, or a v2 agent without sessions
		}
		if !HasMCPOverACP(out) {
			t.Fatalf("WithMCPOverACP(%s) = %s, which claims nothing", result, out)
		}
	})
}
