package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestEditMember(t *testing.T) {
	set := func(v string) func(json.RawMessage) (json.RawMessage, error) {
		return func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(v), nil }
	}
	tests := []struct {
		obj, name string
		edit      func(json.RawMessage) (json.RawMessage, error)
		want      string
	}{
		{`{"a":1, "b" : [1, 2] ,"c":3}`, "b", set(`"x"`), `{"a":1, "b" : "x" ,"c":3}`},
		{`{"a":1}`, "z", set(`{"k":true}`), `{"a":1,"z":{"k":true}}`},
		{`{ }`, "z", set(`1`), `{ "z":1}`},
		{``, "z", set(`1`), `{"z":1}`},
		{`null`, "z", set(`1`), `{"z":1}`},
		{`{"a":1,"a":2}`, "a", set(`3`), `{"a":1,"a":3}`},
		{`{"a":"\u00e9\n"}`, "b", set("[1,\n2]"), `{"a":"\u00e9\n","b":[1,2]}`},
		{`{"a":1}`, "a", set(``), `{"a":1}`},
		{`{"a":1}`, "a", func(json.RawMessage) (json.RawMessage, error) { return nil, nil }, `{"a":1}`},
		// A name JSON cannot spell is the one it reads as: U+FFFD for each
		// invalid byte, so "\xfe" is the member named "\xff" (or "\ufffd").
		{"{\"\xff\":1}", "\xfe", set(`2`), "{\"\xff\":2}"},
		{`{"a":1}`, "\xfe", set(`2`), `{"a":1,"\ufffd":2}`},
		{`{"a":[1]}`, "a", func(old json.RawMessage) (json.RawMessage, error) {
			return append(json.RawMessage(`[0,`), old[1:]...), nil
		}, `{"a":[0,1]}`},
	}
	for _, tt := range tests {
		got, err := EditMember(json.RawMessage(tt.obj), tt.name, tt.edit)
		if err != nil || string(got) != tt.want {
			t.Errorf("EditMember(%s, %q) = %s, %v; want %s", tt.obj, tt.name, got, err, tt.want)
		}
	}

	for _, bad := range []string{`[]`, `"s"`, `{"a":`, `{"a":1,}`, `{"a":1} x`, `{"a":1}{}`} {
		if _, err := EditMember(json.RawMessage(bad), "a", set(`1`)); err == nil {
			t.Errorf("EditMember(%s) succeeded; want an error", bad)
		}
	}
	if _, err := EditMember(json.RawMessage(`{}`), "a", set(`{`)); err == nil {
		t.Error("EditMember accepted an invalid value")
	}
	boom := errors.New("boom")
	if _, err := EditMember(json.RawMessage(`{}`), "a", func(json.RawMessage) (json.RawMessage, error) { return nil, boom }); err != boom {
		t.Errorf("EditMember: got %v, want the edit's error", err)
	}
}

func TestWithMCPOverACP(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true},"_meta":{"x":1}}}`,
			`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"acp":true},"_meta":{"x":1}}}`},
		{`{"protocolVersion":1}`, `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`},
		{`{"agentCapabilities":{"mcpCapabilities":{"acp":false}}}`, `{"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`},
	}
	for _, tt := range tests {
		got, err := WithMCPOverACP(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("WithMCPOverACP(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestWithMCPOverACPByVersion(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		// v1, and a result without a version: the v1 place.
		{`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`,
			`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"acp":true}}}`},
		{`{}`, `{"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`},
		{`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":false,"http":true}}}`,
			`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true,"http":true}}}`},
		// v2: capabilities.session.mcp.acp, an object.
		{`{"protocolVersion":2,"info":{"name":"a"},"capabilities":{"session":{}}}`,
			`{"protocolVersion":2,"info":{"name":"a"},"capabilities":{"session":{"mcp":{"acp":{}}}}}`},
		{`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"http":{}},"prompt":null}}}`,
			`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"http":{},"acp":{}},"prompt":null}}}`},
		{`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"acp":{"_meta":{"k":1}}}}}}`,
			`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"acp":{}}}}}`},
		// v2 without sessions: nothing to claim.
		{`{"protocolVersion":2,"capabilities":{}}`, `{"protocolVersion":2,"capabilities":{}}`},
		{`{"protocolVersion":2,"capabilities":{"session":null}}`, `{"protocolVersion":2,"capabilities":{"session":null}}`},
	} {
		got, err := WithMCPOverACP(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("WithMCPOverACP(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{`{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`, `{"acp":true}`},
		{`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"acp":{}}}}}`, `{"acp":{}}`},
		{`{"protocolVersion":2,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`, ``},
		{`{"protocolVersion":1}`, ``},
	} {
		if got := MCPCapabilities(json.RawMessage(tt.in)); string(got) != tt.want {
			t.Errorf("MCPCapabilities(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestIsV2: a protocolVersion is read as the number it is, however it is
// spelled: 2.0 and 2e0 are 2, as the SDKs, which read JSON numbers as
// doubles, take them. A version is a whole number; a string is none.
func TestIsV2(t *testing.T) {
	for _, tt := range []struct {
		obj  string
		want bool
	}{
		{`{"protocolVersion":2}`, true},
		{`{"protocolVersion":2.0}`, true},
		{`{"protocolVersion":2e0}`, true},
		{`{"protocolVersion":2E+0}`, true},
		{`{"protocolVersion":0.2e1}`, true},
		{`{"protocolVersion":20e-1}`, true},
		{`{"protocolVersion":2.000}`, true},
		{`{"protocolVersion": 3 }`, true},
		{`{"protocolVersion":3.0}`, true},
		{`{"protocolVersion":65535}`, true},
		{`{"protocolVersion":1}`, false},
		{`{"protocolVersion":1.0}`, false},
		{`{"protocolVersion":1e0}`, false},
		{`{"protocolVersion":1.5}`, false},
		{`{"protocolVersion":2.5}`, false},
		{`{"protocolVersion":0}`, false},
		{`{"protocolVersion":-2}`, false},
		{`{"protocolVersion":-2.0}`, false},
		{`{"protocolVersion":"2"}`, false},
		{`{"protocolVersion":null}`, false},
		{`{"protocolVersion":[2]}`, false},
		{`{"protocolVersion":1e400}`, false},
		{`{}`, false},
		{``, false},
		{`{"protocolVersion":2`, false},
	} {
		if got := IsV2(json.RawMessage(tt.obj)); got != tt.want {
			t.Errorf("IsV2(%s) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}
