package wire

import (
	"encoding/json"
	"testing"
)

func TestDialectDetectionOrder(t *testing.T) {
	var got []string
	for d := RFD; d != nil; d = d.Next() {
		got = append(got, d.Initialize)
	}
	want := []string{"proxy/initialize", "_proxy/initialize", "initialize"}
	if len(got) != len(want) {
		t.Fatalf("detection order %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("detection order %q, want %q", got, want)
		}
	}
}

func TestDialectTable(t *testing.T) {
	for _, tt := range []struct {
		method     string
		envelope   *Dialect
		proxyInit  *Dialect
		mcp        string
		initialize bool
	}{
		{"proxy/successor", RFD, nil, "", false},
		{"_proxy/successor", Rust, nil, "", false},
		{"_proxy/successor/request", Thinkwell, nil, "", false},
		{"_proxy/successor/notification", Thinkwell, nil, "", false},
		{"proxy/initialize", nil, RFD, "", true},
		{"_proxy/initialize", nil, Rust, "", true},
		{"initialize", nil, nil, "", true},
		{"mcp/connect", nil, nil, "mcp/connect", false},
		{"mcp/message", nil, nil, "mcp/message", false},
		{"mcp/disconnect", nil, nil, "mcp/disconnect", false},
		{"_mcp/connect", nil, nil, "mcp/connect", false},
		{"_mcp/message", nil, nil, "mcp/message", false},
		{"_mcp/disconnect", nil, nil, "mcp/disconnect", false},
		// Ordinary methods, some with a first byte the names above share.
		{"session/update", nil, nil, "", false},
		{"initialized", nil, nil, "", false},
		{"proxy/successor/request", nil, nil, "", false},
		{"_proxy/successor/", nil, nil, "", false},
		{"mcp/connected", nil, nil, "", false},
		{"_mcp/list", nil, nil, "", false},
		{"", nil, nil, "", false},
	} {
		if got := EnvelopeDialect(tt.method); got != tt.envelope {
			t.Errorf("EnvelopeDialect(%q) = %v, want %v", tt.method, got, tt.envelope)
		}
		if got := IsSuccessor(tt.method); got != (tt.envelope != nil) {
			t.Errorf("IsSuccessor(%q) = %v", tt.method, got)
		}
		if got := ProxyInitDialect(tt.method); got != tt.proxyInit {
			t.Errorf("ProxyInitDialect(%q) = %v, want %v", tt.method, got, tt.proxyInit)
		}
		if got, ok := MCPMethod(tt.method); got != tt.mcp || ok != (tt.mcp != "") {
			t.Errorf("MCPMethod(%q) = %q, %v, want %q", tt.method, got, ok, tt.mcp)
		}
		if got := IsInitialize(tt.method); got != tt.initialize {
			t.Errorf("IsInitialize(%q) = %v, want %v", tt.method, got, tt.initialize)
		}
	}
	if got := Thinkwell.SpellMCP("mcp/message"); got != "_mcp/message" {
		t.Errorf("Thinkwell spells mcp/message %q", got)
	}
	if got := Rust.SpellMCP("mcp/message"); got != "mcp/message" {
		t.Errorf("Rust spells mcp/message %q", got)
	}
	if Thinkwell.Successor(json.RawMessage("1")) != "_proxy/successor/request" || Thinkwell.Successor(nil) != "_proxy/successor/notification" {
		t.Error("Thinkwell's envelopes are not told apart by id")
	}
}

func TestInitializeParams(t *testing.T) {
	for _, tt := range []struct {
		d       *Dialect
		in, out string
	}{
		{RFD, `{"protocolVersion":1}`, `{"protocolVersion":1}`},
		{Thinkwell, `{"protocolVersion":1}`, `{"protocolVersion":1,"_meta":{"proxy":true,"symposium":{"proxy":true}}}`},
		{Thinkwell, `{"_meta":{"x":1},"protocolVersion":1}`, `{"_meta":{"x":1,"proxy":true,"symposium":{"proxy":true}},"protocolVersion":1}`},
		{Thinkwell, `null`, `{"_meta":{"proxy":true,"symposium":{"proxy":true}}}`},
	} {
		got, err := tt.d.InitializeParams(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.out {
			t.Errorf("%s.InitializeParams(%s) = %s, %v, want %s", tt.d.Name, tt.in, got, err, tt.out)
		}
		if marked := MarkedProxy(got); marked != tt.d.InitializeMeta {
			t.Errorf("MarkedProxy(%s) = %v", got, marked)
		}
	}
	for _, tt := range []struct {
		obj  string
		want bool
	}{
		{`{"_meta":{"proxy":true}}`, true},
		{`{"_meta":{"symposium":{"proxy":true}}}`, true},
		{`{"_meta":{"proxy":false}}`, false},
		{`{"_meta":{"pr\u006fxy":true}}`, true},
		{`{"proxy":true}`, false},
		{`[1]`, false},
	} {
		if got := MarkedProxy(json.RawMessage(tt.obj)); got != tt.want {
			t.Errorf("MarkedProxy(%s) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}
