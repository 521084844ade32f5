package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Message
		err  error
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,{"b":"}"}]}}`, Message{ID: raw(`1`), Method: "m", Params: raw(`{"a":[1,{"b":"}"}]}`)}, nil},
		{` { "method" : "n\u00e9" , "params" : [ 1 , 2 ] , "jsonrpc" : "2.0" } `, Message{Method: "né", Params: raw(`[ 1 , 2 ]`)}, nil},
		{`{"jsonrpc":"2.0","id":"x","result":null}`, Message{ID: raw(`"x"`), Result: raw(`null`)}, nil},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}`, Message{ID: raw(`null`), Error: raw(`{"code":-1,"message":"m"}`)}, nil},
		{`{"jsonrpc":"2.0","id":7,"method":"m","extra":{"ignored":true},"params":"\"q\\"}`, Message{ID: raw(`7`), Method: "m", Params: raw(`"\"q\\"`)}, nil},
		// Names are read as encoding/json reads them: escapes decoded, the
		// last of repeated names counting.
		{`{"jsonrpc":"2.0","m\u0065thod":"session/update","p\u0061rams":{}}`, Message{Method: "session/update", Params: raw(`{}`)}, nil},
		{`{"jso\u006erpc":"2\u002e0","id":1,"result":1}`, Message{ID: raw(`1`), Result: raw(`1`)}, nil},
		{`{"jsonrpc":"2.0","method":"a","method":"b","id":1,"id":2}`, Message{ID: raw(`2`), Method: "b"}, nil},
		// A result with "error": null, as some encoders write responses.
		{`{"jsonrpc":"2.0","id":1,"result":{"content":"hi"},"error":null}`, Message{ID: raw(`1`), Result: raw(`{"content":"hi"}`)}, nil},
		{`{"jsonrpc":"2.0","error":null,"id":1,"result":null}`, Message{ID: raw(`1`), Result: raw(`null`)}, nil},
		{`{"jsonrpc":"2.0","id":1,"error":null}`, Message{ID: raw(`1`), Error: raw(`null`)}, nil},
		// JSON-RPC 2.0 requires its version.
		{`{"method":"m"}`, Message{}, ErrNotJSONRPC},
		{`{"jsonrpc":"1.0","method":"m"}`, Message{}, ErrNotJSONRPC},
		{`{"jsonrpc":2.0,"method":"m"}`, Message{}, ErrNotJSONRPC},
		{`{"jsonrpc":"2.0","method":"m","jsonrpc":"1.0"}`, Message{}, ErrNotJSONRPC},
		{`not json`, Message{}, ErrNotJSON},
		{`[{"method":"m"}]`, Message{}, ErrNotJSONRPC},
		{`{"id":1}`, Message{}, ErrNotJSONRPC},
		{`{"method":3}`, Message{}, ErrNotJSONRPC},
		{`{"method":""}`, Message{}, ErrNotJSONRPC},
		{`{"id":1,"method":"m","result":1}`, Message{}, ErrNotJSONRPC},
		{`{"result":1}`, Message{}, ErrNotJSONRPC},
		{`{"id":{},"method":"m"}`, Message{}, ErrNotJSONRPC},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.in))
		if !errors.Is(err, tt.err) {
			t.Errorf("Parse(%s) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err == nil && !equal(got, &tt.want) {
			t.Errorf("Parse(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// TestParseErrorID: a line Parse refuses is answered under the id of what
// would be a request, as it came, when the id can be read; under null when
// it cannot, when the line is not JSON, and for what would be a response,
// whose id is its receiver's own.
func TestParseErrorID(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"id":5,"method":"x"}`, `5`},
		{`{"jsonrpc":"1.0","method":"x","id":"a"}`, `"a"`},
		{`{"jsonrpc":"2.0","id":5,"method":3}`, `5`},
		{`{"jsonrpc":"2.0","id":5,"method":""}`, `5`},
		{`{"id":5.0,"method":"x","params":{}}`, `5.0`},
		{`{"id":"\u0061","method":"x"}`, `"\u0061"`},
		{`{"id":1,"method":"x","id":2}`, `2`},
		{`{"i\u0064":7,"method":"x"}`, `7`},
		{`{"id":null,"method":"x"}`, `null`},
		{`{"id":true,"method":"x"}`, ``},
		{`{"id":[5],"method":"x"}`, ``},
		{`{"method":"x"}`, ``},
		{`{"jsonrpc":"2.0","id":5}`, ``},
		{`{"id":5,"result":1}`, ``},
		{`{"id":5,"error":{"code":1,"message":"m"}}`, ``},
		{`{"jsonrpc":"2.0","id":5,"method":"x","result":1}`, ``},
		{`{"id":5,"method":"x"`, ``},
		{`{"id":5,"method":"x"}}`, ``},
		{`[{"id":5,"method":"x"}]`, ``},
		{`5`, ``},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		if err == nil {
			t.Fatalf("Parse(%s) accepted it", tt.in)
		}
		if got := ParseErrorID(err); string(got) != tt.want {
			t.Errorf("ParseErrorID(Parse(%s)) = %s, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParsePlain(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"x":1}}`, true},
		{` {"params":{"method":"a","method":"b"},"method":"m","jsonrpc":"2.0","extra":[1]} `, true}, // nested repeats are the params' business
		{`{"jsonrpc":"2.0","id":1,"result":{},"x":1,"x":2}`, true},                                  // an unknown name repeated
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","method":"m"}`, false},                                   // version repeated
		{`{"jsonrpc":"2.0","m\u0065thod":"m"}`, false},                                              // an escaped name
		{`{"jsonrpc":"2.0","method":"proxy/successor","method":"m"}`, false},
		{`{"jsonrpc":"2.0","method":"m","params":1,"params":2}`, false},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","method":"m","meth\u006fd":"proxy/successor"}`, false}, // an escaped name
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tt.in, err)
		}
		if m.Plain() != tt.want {
			t.Errorf("Parse(%s).Plain() = %v, want %v", tt.in, m.Plain(), tt.want)
		}
		if string(m.Raw) != tt.in {
			t.Errorf("Parse(%s).Raw = %s", tt.in, m.Raw)
		}
	}
}

func TestUnwrapAndWrap(t *testing.T) {
	params := raw(`{"method":"session/update","params":{"x":[1,"}"]},"_meta":{"hop":1}}`)
	method, inner, err := Unwrap(params)
	if err != nil || method != "session/update" || string(inner) != `{"x":[1,"}"]}` {
		t.Fatalf("Unwrap = %q, %s, %v", method, inner, err)
	}
	got := AppendWrapped(nil, raw(`5`), MethodSuccessor, method, inner)
	want := `{"jsonrpc":"2.0","id":5,"method":"proxy/successor","params":{"method":"session/update","params":{"x":[1,"}"]}}}`
	if string(got) != want {
		t.Errorf("AppendWrapped = %s\nwant %s", got, want)
	}
	if _, _, err := Unwrap(raw(`{"params":{}}`)); err == nil {
		t.Error("Unwrap accepted an envelope without a method")
	}
	if m, inner, err := Unwrap(raw(`{"method":"n","params":null}`)); err != nil || m != "n" || inner != nil {
		t.Errorf("null params: %q %s %v", m, inner, err)
	}
}

// TestParseMalformedError: a response's error is malformed unless it is
// an object with an integer code and a string message, as JSON-RPC 2.0
// requires and the TypeScript SDK checks (Number.isInteger, typeof
// "string"), its names read as JSON.parse reads them.
func TestParseMalformedError(t *testing.T) {
	for _, tt := range []struct {
		in        string
		malformed bool
	}{
		{`{"jsonrpc":"2.0","id":3,"result":{"a":1}}`, false},
		{`{"jsonrpc":"2.0","id":3,"result":{},"error":null}`, false}, // the result
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"message":"no","data":{"code":"x"},"code":7}}`, false},
		{` {"jsonrpc":"2.0","id":3,"error" : { "code" : 0 , "message" : "" } } `, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1.0,"message":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-3e4,"message":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"c\u006fde":1,"m\u0065ssage":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"err\u006fr":{"code":1,"message":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":"1","message":"no"},"error":{"code":1,"message":"no"}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no","code":2}}`, false},
		{`{"jsonrpc":"2.0","id":3,"error":null}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":"boom"}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":-32603}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":[{"code":1,"message":"no"}]}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"message":"no"}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":"-32603","message":"no"}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1.5,"message":"no"}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1e-1,"message":"no"}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1e400,"message":"no"}}`, true}, // Infinity
		{`{"jsonrpc":"2.0","id":3,"error":{"code":null,"message":"no"}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":null}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":{"text":"no"}}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"Code":1,"Message":"no"}}`, true}, // JSON.parse's names are exact
		{`{"jsonrpc":"2.0","id":3,"err\u006fr":null}`, true},
		{`{"jsonrpc":"2.0","id":3,"err\u006fr":{"code":1}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no"},"error":{"code":1}}`, true},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no","message":7}}`, true},
		{`{"jsonrpc":"2.0","id":3,"result":1,"error":"boom"}`, true},
	} {
		m, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tt.in, err)
		}
		if m.MalformedError() != tt.malformed {
			t.Errorf("Parse(%s).MalformedError() = %v, want %v", tt.in, m.MalformedError(), tt.malformed)
		}
	}
}

// FuzzParse checks the top-level scanner against encoding/json, both ways:
// whatever Parse accepts, its fields are exactly the values encoding/json
// finds (escaped names decoded, the last of repeated names counting), as
// are the members JSON-RPC does not define that AppendExtra gives back, and
// re-encoding keeps them; and whatever encoding/json reads as a JSON-RPC 2.0
// message, Parse accepts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"b"}}`,
		`{"jsonrpc":"2.0","id":"a\"b","result":[1,2,{"c":null}]}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"m\u0041","params":[]}`,
		` {"method" : "m" , "id" : -1.5e3 , "jsonrpc" : "2.0" } `,
		`{"jsonrpc":"2.0","method":"m","method":"n"}`,
		`{"jsonrpc":"2.0","method":1,"method":"m"}`, `{"jsonrpc":"1.0","jsonrpc":"2.0","method":"m"}`,
		`{"jsonrpc":"2.0","method":"m","params":1,"par\u0061ms":2}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"id":2}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`, `{"jsonrpc":"2.0","id":1,"error" : null ,"result":1,"error":null}`,
		`{"jso\u006erpc":"2\u002e0","m\u0065thod":"m"}`,
		`{"jsonrpc":"2.0","id":1,"error":null}`, `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x","c\u006fde":2e0}}`,
		`{"method":"m"}`, `{"jsonrpc":"1.0","method":"m"}`,
		`{}`, `[]`, `null`, `{"a":}`,
		`{"id":5,"method":"x"}`, `{"jsonrpc":"1.0","id":"a","method":"m","params":{}}`,
		`{"id":5,"method":"x","id":6}`, `{"i\u0064":5,"method":1}`, `{"id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"x-a":[1],"x\u0041":2,"x-a":3}`, `{"_meta":{},"jsonrpc":"2.0","method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-3.2e4,"message":"x","data":[1],"d\u0061ta":2}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":1e19,"message":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(data, &ref)
		if err != nil {
			if refErr == nil && jsonRPC(ref) {
				t.Fatalf("Parse refused what encoding/json reads as JSON-RPC 2.0: %v", err)
			}
			// An id to answer an invalid request under is the request's:
			// a usable id, as encoding/json reads it, in an object with a
			// method and neither result nor error.
			if id := ParseErrorID(err); id != nil {
				_, hasResult := ref["result"]
				_, hasError := ref["error"]
				_, hasMethod := ref["method"]
				if refErr != nil || !validID(id) || ref["id"] == nil || !bytes.Equal(compact(t, id), compact(t, ref["id"])) ||
					!hasMethod || hasResult || hasError {
					t.Fatalf("ParseErrorID(%v) = %s for %s", err, id, data)
				}
			}
			return
		}
		if refErr != nil {
			t.Fatalf("Parse accepted what encoding/json rejects: %v", refErr)
		}
		if !jsonRPC(ref) {
			t.Fatalf("Parse accepted what encoding/json does not read as JSON-RPC 2.0")
		}
		checkExtra(t, m, ref)
		again, err := Parse(m.Bytes())
		if err != nil || !equal(again, m) || !again.Plain() {
			t.Fatalf("re-encoding changed the message: %s", m.Bytes())
		}
		check := func(name string, got json.RawMessage) {
			want, ok := ref[name]
			if !ok {
				if got != nil {
					t.Fatalf("%s = %s, absent in input", name, got)
				}
				return
			}
			if !bytes.Equal(compact(t, got), compact(t, want)) {
				t.Fatalf("%s = %s, want %s", name, got, want)
			}
		}
		check("id", m.ID)
		check("params", m.Params)
		if m.Method == "" {
			if e, ok := ref["error"]; ok && string(compact(t, e)) == "null" && ref["result"] != nil {
				delete(ref, "error") // a result with "error": null is the result
			}
			check("result", m.Result)
			check("error", m.Error)
			if e, ok := ref["error"]; (ok && !errorObject(e)) != m.MalformedError() {
				t.Fatalf("MalformedError() = %v for error %s", m.MalformedError(), e)
			}
			if m.Error != nil {
				checkReadError(t, m)
			}
			return
		}
		var method string
		if json.Unmarshal(ref["method"], &method) != nil || method != m.Method {
			t.Fatalf("method = %q, encoding/json reads %s", m.Method, ref["method"])
		}
	})
}

// jsonRPC reports whether an object, as encoding/json decoded it, is a
// JSON-RPC 2.0 message as Parse defines one.
func jsonRPC(obj map[string]json.RawMessage) bool {
	var version, method string
	if json.Unmarshal(obj["jsonrpc"], &version) != nil || version != "2.0" {
		return false
	}
	id, hasID := obj["id"]
	if hasID && (len(id) == 0 || !validID(id)) {
		return false
	}
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	rawMethod, hasMethod := obj["method"]
	if hasMethod {
		return json.Unmarshal(rawMethod, &method) == nil && method != "" && !hasResult && !hasError
	}
	return (hasResult || hasError) && hasID
}

// errorObject reports whether e, as encoding/json finds it, is an error
// object JSON-RPC 2.0 allows, read as JavaScript reads it: an integer code
// (in a float64) and a string message.
func errorObject(e json.RawMessage) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(e, &obj) != nil || obj == nil {
		return false
	}
	code, err := strconv.ParseFloat(string(obj["code"]), 64)
	var msg string
	return err == nil && code == math.Trunc(code) && json.Unmarshal(obj["message"], &msg) == nil && obj["message"][0] == '"'
}

// checkReadError holds ReadError of m's error to Parse, which says
// whether it is malformed, and to encoding/json, which reads its members.
func checkReadError(t *testing.T, m *Message) {
	t.Helper()
	code, msg, data, ok := ReadError(m.Error)
	if ok == m.MalformedError() {
		t.Fatalf("ReadError(%s) ok = %v, but MalformedError() = %v", m.Error, ok, m.MalformedError())
	}
	if !ok {
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m.Error, &obj); err != nil {
		t.Fatal(err)
	}
	f, _ := strconv.ParseFloat(string(obj["code"]), 64)
	want := int64(f)
	switch {
	case f >= math.MaxInt64:
		want = math.MaxInt64
	case f <= math.MinInt64:
		want = math.MinInt64
	}
	if n, err := strconv.ParseInt(string(obj["code"]), 10, 64); err == nil {
		want = n // exact, where a float64 would round it
	}
	var wantMsg string
	_ = json.Unmarshal(obj["message"], &wantMsg)
	if code != want || msg != wantMsg || !bytes.Equal(data, obj["data"]) {
		t.Fatalf("ReadError(%s) = %d %q %s; encoding/json reads %d %q %s", m.Error, code, msg, data, want, wantMsg, obj["data"])
	}
}

// TestReadError: an error object's code is an integer however written, as
// Parse checks it; ReadError reads what Parse accepts, and nothing else.
func TestReadError(t *testing.T) {
	for _, tt := range []struct {
		in   string
		code int64
		msg  string
		data string
		ok   bool
	}{
		{`{"code":-32601,"message":"no"}`, -32601, "no", "", true},
		{`{"code":1.0,"message":"no"}`, 1, "no", "", true},
		{`{"code":1e3,"message":"no","data":{"a":[1]}}`, 1000, "no", `{"a":[1]}`, true},
		{`{"code":-3.2E4,"message":"no"}`, -32000, "no", "", true},
		{`{"code":-0,"message":""}`, 0, "", "", true},
		{`{"code":3000000000,"message":"big"}`, 3000000000, "big", "", true},
		{`{"code":9223372036854775807,"message":"m"}`, math.MaxInt64, "m", "", true},
		{`{"code":1e19,"message":"m"}`, math.MaxInt64, "m", "", true},
		{`{"code":-1e300,"message":"m"}`, math.MinInt64, "m", "", true},
		{`{"code":"1","message":"m","code":2,"m\u0065ssage":"n\u00e9","data":null}`, 2, "né", "null", true},
		{`{"code":1.5,"message":"no"}`, 0, "", "", false},
		{`{"code":1e400,"message":"no"}`, 0, "", "", false},
		{`{"code":1,"message":null}`, 0, "", "", false},
		{`{"Code":1,"Message":"no"}`, 0, "", "", false},
		{`{"code":1}`, 0, "", "", false},
		{`null`, 0, "", "", false},
		{`[1]`, 0, "", "", false},
	} {
		code, msg, data, ok := ReadError([]byte(tt.in))
		if code != tt.code || msg != tt.msg || string(data) != tt.data || ok != tt.ok {
			t.Errorf("ReadError(%s) = %d %q %s %v, want %d %q %s %v", tt.in, code, msg, data, ok, tt.code, tt.msg, tt.data, tt.ok)
		}
		if ok != isErrorObject([]byte(tt.in)) {
			t.Errorf("ReadError(%s) ok = %v, isErrorObject does not agree", tt.in, ok)
		}
	}
}

func compact(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("invalid raw value %q: %v", b, err)
	}
	return buf.Bytes()
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func equal(a, b *Message) bool {
	return bytes.Equal(a.ID, b.ID) && a.Method == b.Method && bytes.Equal(a.Params, b.Params) &&
		bytes.Equal(a.Result, b.Result) && bytes.Equal(a.Error, b.Error)
}

// FuzzUnwrap checks envelope unwrapping against encoding/json.
func FuzzUnwrap(f *testing.F) {
	f.Add([]byte(`{"method":"session/update","params":{"a":1},"_meta":{}}`))
	f.Add([]byte(`{"params":[],"method":"x\\ty"}`))
	f.Add([]byte(`{"method":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		method, inner, err := Unwrap(data)
		if err != nil {
			return
		}
		// A map, not a struct: encoding/json matches struct fields
		// case-insensitively, JSON-RPC does not.
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("Unwrap accepted %s: %v", data, err)
		}
		var want string
		if err := json.Unmarshal(ref["method"], &want); err != nil || method != want {
			t.Fatalf("method %q, want %q (%v)", method, want, err)
		}
		params := ref["params"]
		if string(params) == "null" {
			params = nil
		}
		if (inner == nil) != (params == nil) || (inner != nil && !bytes.Equal(compact(t, inner), compact(t, params))) {
			t.Fatalf("params %s, want %s", inner, params)
		}
	})
}

// FuzzValid checks Valid against encoding/json.Valid, which it replaces.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, " \t{\"x\":[1,2.5e-3,true,null]}\r\n", `"\ud800"`, "\"\xff\"",
		`{"a":"\u00e9"}`, `01`, `1.`, `[1,]`, `{"a" 1}`, ``, ` `, `"\x"`, "\"\x01\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

// TestParseAllocations: parsing a message into one of the caller's
// allocates nothing when its method is one wire knows by name; any other
// method costs its string.
func TestParseAllocations(t *testing.T) {
	for _, tt := range []struct {
		line   string
		method string
		want   float64
	}{
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`, "session/update", 0},
		{`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}`, "session/prompt", 0},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"m","data":{"x":[1]}}}`, "", 0},
		{`{"jsonrpc":"2.0","method":"x/custom","params":{}}`, "x/custom", 1},
	} {
		line := []byte(tt.line)
		var m Message
		if err := ParseInto(&m, line); err != nil || m.Method != tt.method {
			t.Fatalf("ParseInto(%s) = method %q, %v; want %q", tt.line, m.Method, err, tt.method)
		}
		if n := testing.AllocsPerRun(100, func() { ParseInto(&m, line) }); n != tt.want {
			t.Errorf("ParseInto(%s) allocates %v times, want %v", tt.line, n, tt.want)
		}
	}
}

// TestResponseSize checks that a buffer of ResponseSize holds every
// response Append makes.
func TestResponseSize(t *testing.T) {
	for _, id := range []json.RawMessage{nil, json.RawMessage(`7`), json.RawMessage(`"a-string-id"`)} {
		for _, m := range []Message{
			{ID: id},
			{ID: id, Result: json.RawMessage(`{"stopReason":"end_turn"}`)},
			{ID: id, Error: json.RawMessage(`{"code":-32601,"message":"no"}`)},
		} {
			got := m.Append(nil)
			if n := ResponseSize(m.ID, m.Result, m.Error); len(got) > n {
				t.Errorf("ResponseSize = %d, but Append made %d bytes: %s", n, len(got), got)
			}
		}
	}
}

// TestErrorAsItCame: an error's data carries raw JSON (an id, a peer's
// error) as it came, and its message is written as AppendString writes a
// string: nothing is escaped for HTML, where json.Marshal escapes raw
// JSON again.
func TestErrorAsItCame(t *testing.T) {
	for _, id := range []string{`"c&1"`, `"c\u00261"`, `"<c>"`, "\"c\u20281\"", `7`} {
		e := Errorf(-32602, "unknown MCP connection %s", id).WithData(map[string]json.RawMessage{"connectionId": json.RawMessage(id)})
		want := `{"code":-32602,"message":` + string(AppendString(nil, "unknown MCP connection "+id)) + `,"data":{"connectionId":` + id + `}}`
		if got := string(e.Encode()); got != want {
			t.Errorf("%s: Encode() = %s, want %s", id, got, want)
		}
		if got := string(ErrorResponse(nil, e).Bytes()); got != `{"jsonrpc":"2.0","id":null,"error":`+want+`}` {
			t.Errorf("%s: ErrorResponse = %s", id, got)
		}
	}
}

// FuzzAppendString checks AppendString against encoding/json, without HTML
// escaping, and its test of eight bytes at a time against one at a time.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"session/prompt", "", "a\"b", "0123456\x7f", "01234567\\", "\x1f", "né",
		"\xff0123456789", "0123456\xff", "~~~~~~~~\x7e", "\u2028", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := AppendString([]byte("x"), s), append([]byte("x"), bytes.TrimSuffix(b.Bytes(), []byte("\n"))...); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
		}
		want := false
		for _, c := range []byte(s) {
			want = want || c < 0x20 || c == '"' || c == '\\' || c >= 0x7f
		}
		if got := needsEscape(s); got != want {
			t.Fatalf("needsEscape(%q) = %v, want %v", s, got, want)
		}
	})
}

// TestNeedsEscapeEachPosition puts each byte value at each place of
// strings of 1 to 20 bytes: the words tested whole, the last one tested
// again where it overlaps, and the short strings tested a byte at a time.
func TestNeedsEscapeEachPosition(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for c := range 256 {
			want := c < 0x20 || c == '"' || c == '\\' || c >= 0x7f
			for at := range n {
				s := []byte("abcdefghijklmnopqrst"[:n])
				s[at] = byte(c)
				if got := needsEscape(string(s)); got != want {
					t.Fatalf("needsEscape(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}
