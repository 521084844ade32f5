package conductor

import (
	"encoding/json"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestRouteMCP is the MCP rule table: by side (the agent; a proxy's or the
// client's plain request, a call made or passed on toward a server; the
// client's notification; anything else, where servers' owners answer
// from), method and the key the params carry.
func TestRouteMCP(t *testing.T) {
	topo := topology{mode: AgentMode, proxies: 2} // the agent is at 3
	const req, note, plain, wrapped = true, false, false, true
	for _, c := range []struct {
		src                int
		enveloped, request bool
		method             string
		params             string
		want               mcpRule
	}{
		{3, plain, req, "mcp/connect", `{"acpId":"s"}`, mcpConnect},
		{3, plain, req, "mcp/connect", `{"serverId":"s"}`, mcpConnect},
		{1, plain, req, "mcp/connect", `{"serverId":"s"}`, mcpOrdinary},
		{1, wrapped, req, "mcp/connect", `{"serverId":"s"}`, mcpOrdinary},
		{3, plain, req, "mcp/message", `{"connectionId":"c","method":"tools/list"}`, mcpOnConn},
		{3, plain, note, "mcp/disconnect", `{"connectionId":"c"}`, mcpOnConn},
		{0, plain, req, "mcp/message", `{"connectionId":"c","method":"roots/list"}`, mcpOnConn},
		{2, plain, note, "mcp/disconnect", `{"connectionId":"c"}`, mcpOnConn},
		{2, plain, req, "mcp/disconnect", `{"connectionId":"c"}`, mcpOnConn},
		{2, plain, req, "mcp/message", `{"connectionId":"c","method":"roots/list"}`, mcpOnConn},
		{3, plain, req, "mcp/message", `{"serverId":"s","requestId":"r","method":"tools/call"}`, mcpToServer},
		{3, plain, req, "mcp/message", `{"serverId":"s","connectionId":"c","method":"tools/call"}`, mcpOnConn},
		// The client's messages go by position, to the first proxy, but
		// where the tables routed what they answer or must re-address them.
		{0, plain, note, "mcp/message", `{"serverId":"s","requestId":"r","method":"notifications/progress"}`, mcpFromClient},
		{0, plain, req, "mcp/message", `{"serverId":"s","requestId":"r","method":"tools/call"}`, mcpToServer},
		{0, plain, note, "mcp/message", `{"connectionId":"c","method":"notifications/progress"}`, mcpOnConn},
		{0, plain, note, "mcp/disconnect", `{"connectionId":"c"}`, mcpOnConn},
		{0, plain, note, "mcp/message", `{"method":"notifications/progress"}`, mcpOrdinary},
		{0, plain, req, "mcp/connect", `{"serverId":"s"}`, mcpOrdinary},
		{1, wrapped, note, "mcp/message", `{"serverId":"s","requestId":"r","method":"notifications/progress"}`, mcpFromServer},
		// An owner built on the TypeScript SDK notifies its predecessor.
		{1, plain, note, "mcp/message", `{"serverId":"s","requestId":"r","method":"notifications/progress"}`, mcpFromServer},
		// A proxy passing a call on toward the client: on to the server,
		// never back to the agent.
		{1, plain, req, "mcp/message", `{"serverId":"s","requestId":"r","method":"tools/call"}`, mcpToServer},
		{3, plain, req, "mcp/message", `{"method":"tools/call"}`, mcpOrdinary},
		{3, plain, note, "mcp/disconnect", `{"serverId":"s"}`, mcpOrdinary},
		{3, plain, req, "mcp/other", `{"serverId":"s"}`, mcpOrdinary},
		// The Thinkwell dialect: a parent connects by URL; sacp names the
		// connection to disconnect connection_id.
		{3, plain, req, "mcp/connect", `{"connectionId":"c","url":"acp:u"}`, mcpConnect},
		{3, plain, req, "mcp/connect", `{"acp_url":"acp:u"}`, mcpConnect},
		{1, wrapped, note, "mcp/disconnect", `{"connection_id":"c"}`, mcpOnConn},
		{3, plain, note, "mcp/disconnect", `{"connection_id":"c"}`, mcpOnConn},
	} {
		if got := topo.routeMCP(c.src, c.enveloped, c.request, c.method, []byte(c.params)); got != c.want {
			t.Errorf("from %d (enveloped %v, request %v): %s %s: rule %d, want %d", c.src, c.enveloped, c.request, c.method, c.params, got, c.want)
		}
	}
}

// TestToCaller: a server's message about a call goes to the position that
// made it, dressed as the call's answer comes back there.
func TestToCaller(t *testing.T) {
	agent := topology{mode: AgentMode, proxies: 2}
	nested := topology{mode: ProxyMode, proxies: 2}
	for _, c := range []struct {
		topo   topology
		caller int
		want   delivery
	}{
		{agent, 3, delivery{to: 3, method: methodMCPMessage}},
		{agent, 2, delivery{to: 2, method: methodMCPMessage}},
		{agent, 1, delivery{to: 1, method: methodMCPMessage}},
		{agent, 0, delivery{to: 0, method: methodMCPMessage}},
		// In proxy mode the parent's successor side takes envelopes; the
		// parent's own calls come plain, and go back plain.
		{nested, 3, delivery{to: 3, wrap: true, method: methodMCPMessage}},
		{nested, 1, delivery{to: 1, method: methodMCPMessage}},
		{nested, 0, delivery{to: 0, method: methodMCPMessage}},
	} {
		if got := c.topo.toCaller(c.caller, methodMCPMessage); got != c.want {
			t.Errorf("%v: to caller %d: %+v, want %+v", c.topo.mode, c.caller, got, c.want)
		}
	}
}

// TestRespell is the spelling × agent table: serverId always, the RFD's id
// for an agent that used it or has not been heard from; name, _meta,
// unknown members and other entries kept.
func TestRespell(t *testing.T) {
	const others = `{"name":"fs","command":"x","args":[],"env":[]}`
	for _, c := range []struct {
		agent, decl, want string
	}{
		{"", `{"type":"acp","name":"t","id":"s1","_meta":{"k":1},"x":true}`, `{"type":"acp","name":"t","id":"s1","_meta":{"k":1},"x":true,"serverId":"s1"}`},
		{"", `{"type":"acp","name":"t","serverId":"s1"}`, `{"type":"acp","name":"t","serverId":"s1","id":"s1"}`},
		{"id", `{"type":"acp","name":"t","serverId":"s1"}`, `{"type":"acp","name":"t","serverId":"s1","id":"s1"}`},
		{"serverId", `{"type":"acp","name":"t","serverId":"s1"}`, `{"type":"acp","name":"t","serverId":"s1"}`},
		{"serverId", `{"type":"acp","name":"t","id":"s1"}`, `{"type":"acp","name":"t","id":"s1","serverId":"s1"}`},
	} {
		params := `{"cwd":"/","mcpServers":[` + others + `,` + c.decl + `],"_meta":{"top":1}}`
		got, err := respell(json.RawMessage(params), c.agent)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"cwd":"/","mcpServers":[` + others + `,` + c.want + `],"_meta":{"top":1}}`
		if string(got) != want {
			t.Errorf("agent %q, %s:\n got %s\nwant %s", c.agent, c.decl, got, want)
		}
	}
}

// TestDeclarations is the declaration table: which entries of mcpServers
// are acp servers, their ids and their owners' spellings.
func TestDeclarations(t *testing.T) {
	for _, c := range []struct{ decl, id, spelling string }{
		{`{"type":"acp","name":"t","id":"s1"}`, "s1", "id"},
		{`{"type":"acp","name":"t","id":"s1","serverId":"s2"}`, "s1", "id"},
		{`{"type":"acp","name":"t","serverId":"s1"}`, "s1", "serverId"},
		{`{"type":"http","name":"t","url":"acp:6f1c","headers":[]}`, "acp:6f1c", "url"},
		{`{"type":"http","name":"t","url":"http://127.0.0.1:9/mcp","headers":[]}`, "", ""},
		{`{"type":"sse","name":"t","url":"acp:6f1c"}`, "", ""},
		{`{"name":"fs","command":"x","args":[],"env":[]}`, "", ""},
	} {
		var d acpDeclaration
		if err := json.Unmarshal([]byte(c.decl), &d); err != nil {
			t.Fatal(err)
		}
		if id, spelling := d.serverID(); id != c.id || spelling != c.spelling {
			t.Errorf("%s: %q, %q; want %q, %q", c.decl, id, spelling, c.id, c.spelling)
		}
	}
}

// TestACPForm turns Thinkwell-dialect declarations into acp ones for the
// agent, keeping everything else, and then respell spells them as for any
// acp server.
func TestACPForm(t *testing.T) {
	const others = `{"name":"fs","command":"x","args":[],"env":[]},{"type":"http","name":"web","url":"https://x.test/mcp","headers":[]}`
	for _, c := range []struct{ decl, want string }{
		{`{"type":"http","name":"tw","url":"acp:6f1c","headers":[]}`, `{"name":"tw","serverId":"acp:6f1c","type":"acp","id":"acp:6f1c"}`},
		{`{"type":"http","name":"tw","url":"acp:6f1c","headers":[],"_meta":{"k":1},"x":true}`, `{"_meta":{"k":1},"name":"tw","serverId":"acp:6f1c","type":"acp","x":true,"id":"acp:6f1c"}`},
		{`{"type":"acp","name":"t","serverId":"s1"}`, `{"type":"acp","name":"t","serverId":"s1","id":"s1"}`},
	} {
		params := `{"cwd":"/","mcpServers":[` + others + `,` + c.decl + `]}`
		out, err := acpForm(json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		if out, err = respell(out, ""); err != nil {
			t.Fatal(err)
		}
		if want := `{"cwd":"/","mcpServers":[` + others + `,` + c.want + `]}`; string(out) != want {
			t.Errorf("%s:\n got %s\nwant %s", c.decl, out, want)
		}
	}
}

// TestURLForm turns acp declarations into Thinkwell-dialect ones for a
// parent of that dialect, keeping everything else, and the parent's
// connect by that URL finds the server declared under the bare id.
func TestURLForm(t *testing.T) {
	const others = `{"name":"fs","command":"x","args":[],"env":[]},{"type":"http","name":"tw","url":"acp:6f1c","headers":[]}`
	for _, c := range []struct{ decl, want string }{
		{`{"type":"acp","name":"t","serverId":"s1"}`, `{"headers":[],"name":"t","type":"http","url":"acp:s1"}`},
		{`{"type":"acp","name":"t","id":"s1","_meta":{"k":1},"x":true}`, `{"_meta":{"k":1},"headers":[],"name":"t","type":"http","url":"acp:s1","x":true}`},
		{`{"type":"acp","name":"t","serverId":"acp:6f1d"}`, `{"headers":[],"name":"t","type":"http","url":"acp:6f1d"}`},
	} {
		out, err := urlForm(json.RawMessage(`{"cwd":"/","mcpServers":[` + others + `,` + c.decl + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"cwd":"/","mcpServers":[` + others + `,` + c.want + `]}`; string(out) != want {
			t.Errorf("%s:\n got %s\nwant %s", c.decl, out, want)
		}
	}
	r := newMCPRoutes()
	r.declare(1, "session/new", json.RawMessage(`{"mcpServers":[{"type":"acp","name":"t","serverId":"s1"},{"type":"http","name":"tw","url":"acp:6f1c","headers":[]}]}`))
	for _, c := range []struct{ target, spelling, id string }{
		{"acp:s1", "url", "s1"},
		{"acp:6f1c", "url", "acp:6f1c"},
		{"s1", "serverId", "s1"},
	} {
		if srv, id, ok := r.serverAt(c.target, c.spelling); !ok || id != c.id || srv.owner != 1 {
			t.Errorf("serverAt(%q, %q) = %+v, %q, %v; want the server at 1 as %q", c.target, c.spelling, srv, id, ok, c.id)
		}
	}
	if _, _, ok := r.serverAt("acp:s1", "serverId"); ok {
		t.Error("an acp: id found a server under the bare id outside the url spelling")
	}
}

// TestOwnerSpellings is the spelling table: what the conductor sends an
// owner to connect and disconnect, and what it reads in the answer.
func TestOwnerSpellings(t *testing.T) {
	meta := json.RawMessage(`{"k":1}`)
	for _, c := range []struct {
		spelling, proposed, connect, disconnect, method string
	}{
		{"id", "", `{"acpId":"s1","_meta":{"k":1}}`, `{"connectionId":"c1"}`, "mcp/connect"},
		{"serverId", "", `{"serverId":"s1","_meta":{"k":1}}`, `{"connectionId":"c1"}`, "mcp/connect"},
		// A Thinkwell parent's proposal, passed on to an RFD owner, which
		// may take it.
		{"serverId", `"p1"`, `{"connectionId":"p1","serverId":"s1","_meta":{"k":1}}`, `{"connectionId":"c1"}`, "mcp/connect"},
		{"url", `"p1"`, `{"connectionId":"p1","url":"s1","acp_url":"s1","_meta":{"k":1}}`, `{"connectionId":"c1","connection_id":"c1"}`, "_mcp/connect"},
	} {
		var proposed json.RawMessage
		if c.proposed != "" {
			proposed = json.RawMessage(c.proposed)
		}
		if got := string(connectParams(c.spelling, "s1", proposed, meta)); got != c.connect {
			t.Errorf("%s: connect %s, want %s", c.spelling, got, c.connect)
		}
		if got := string(disconnectParams(c.spelling, []byte(`"c1"`))); got != c.disconnect {
			t.Errorf("%s: disconnect %s, want %s", c.spelling, got, c.disconnect)
		}
		if got := spell(c.spelling, methodMCPConnect); got != c.method {
			t.Errorf("%s: method %s, want %s", c.spelling, got, c.method)
		}
		id, spelling := connectTarget(json.RawMessage(c.connect))
		if id != "s1" || spelling != c.spelling {
			t.Errorf("connectTarget(%s) = %q, %q", c.connect, id, spelling)
		}
	}
	for _, c := range []struct{ result, proposed, want string }{
		{`{"connectionId":"c1"}`, ``, `"c1"`},
		{`{"connection_id":"c1"}`, ``, `"c1"`},
		{`{"connection_id":"c1","connectionId":"c1","serverInfo":{}}`, `"p1"`, `"c1"`},
		{`{"serverInfo":{"name":"tw"}}`, `"p1"`, `"p1"`}, // @thinkwell/conductor keeps its own
		{`{"serverInfo":{"name":"tw"}}`, ``, ``},
		{`null`, `"p1"`, ``},
	} {
		var proposed json.RawMessage
		if c.proposed != "" {
			proposed = json.RawMessage(c.proposed)
		}
		if got := string(connectionIDOf(json.RawMessage(c.result), proposed)); got != c.want {
			t.Errorf("connectionIDOf(%s, %s) = %s, want %s", c.result, c.proposed, got, c.want)
		}
	}
}

// TestStatelessRules is the legacy × stateless table.
func TestStatelessRules(t *testing.T) {
	for _, c := range []struct {
		method  string
		request bool
		params  string
		want    statelessRule
	}{
		{"initialize", true, `{"protocolVersion":"2025-11-25"}`, slInitialize},
		{"notifications/initialized", false, `{}`, slAbsorb},
		{"notifications/cancelled", false, `{"requestId":3}`, slCancel},
		{"notifications/roots/list_changed", false, `{}`, slDrop},
		{"ping", true, `{}`, slPong},
		{"ping", true, ``, slPong},
		{"ping", true, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, slPong},
		{"tools/list", true, `{}`, slAddMeta},
		{"tools/list", true, ``, slAddMeta},
		{"tools/call", true, `{"_meta":{"progressToken":1}}`, slAddMeta},
		{"tools/call", true, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, slPass},
		{"server/discover", true, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, slPass},
	} {
		if got := statelessRuleFor(c.method, c.request, json.RawMessage(c.params)); got != c.want {
			t.Errorf("%s (request %v) %s: rule %d, want %d", c.method, c.request, c.params, got, c.want)
		}
	}
}

func TestWithStatelessMeta(t *testing.T) {
	client := &mcpClient{version: "2025-11-25", capabilities: json.RawMessage(`{"roots":{}}`), info: json.RawMessage(`{"name":"c","version":"1"}`)}
	for _, c := range []struct{ in, want string }{
		{`{"name":"greet"}`, `{"name":"greet","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}`},
		{``, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}`},
		{`{"_meta":{"progressToken":7,"io.modelcontextprotocol/clientInfo":{"name":"x"}}}`, `{"_meta":{"progressToken":7,"io.modelcontextprotocol/clientInfo":{"name":"x"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}`},
	} {
		if got := withStatelessMeta(json.RawMessage(c.in), client); string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	if got := string(withStatelessMeta(json.RawMessage(`{}`), &mcpClient{})); got != `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}` {
		t.Errorf("without an initialize: %s", got)
	}
}

// TestOutcomes is the binding × binding table for answers.
func TestOutcomes(t *testing.T) {
	msg := func(result, err string) *wire.Message {
		m := &wire.Message{}
		if result != "" {
			m.Result = json.RawMessage(result)
		}
		if err != "" {
			m.Error = json.RawMessage(err)
		}
		return m
	}
	for _, c := range []struct {
		name             string
		toRequest        bool // connect answer → request carrier, else the reverse
		in, inErr        string
		wantRes, wantErr string
	}{
		{"result to carrier", true, `{"tools":[]}`, "", `{"result":{"tools":[]}}`, ""},
		{"MCP error to carrier", true, "", `{"code":-32602,"message":"bad"}`, `{"error":{"code":-32602,"message":"bad"}}`, ""},
		{"cancel stays outer", true, "", `{"code":-32800,"message":"cancelled"}`, "", `{"code":-32800,"message":"cancelled"}`},
		{"carrier result", false, `{"result":{"tools":[]}}`, "", `{"tools":[]}`, ""},
		{"carrier error", false, `{"error":{"code":-32601,"message":"nope"}}`, "", "", `{"code":-32601,"message":"nope"}`},
		{"outer error stays", false, "", `{"code":-33001,"message":"gone"}`, "", `{"code":-33001,"message":"gone"}`},
		{"bad carrier", false, `{"other":1}`, "", "", `{"code":-33002,"message":"invalid MCP-over-ACP response carrier"}`},
	} {
		m := msg(c.in, c.inErr)
		if c.toRequest {
			asOutcome(m)
		} else {
			fromOutcome(m)
		}
		if string(m.Result) != c.wantRes || string(m.Error) != c.wantErr {
			t.Errorf("%s: result %s error %s, want %s / %s", c.name, m.Result, m.Error, c.wantRes, c.wantErr)
		}
	}
}

// TestInitializeResult: a legacy client's initialize is answered from the
// owner's server/discover, as the carrier's result; from the declaration
// when the owner's server has none (method not found, in the carrier or
// as the owner's own error); and with any other error as it came.
func TestInitializeResult(t *testing.T) {
	declared := `{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25","serverInfo":{"name":"tools","version":"0"}}`
	for _, c := range []struct {
		name             string
		resp             wire.Message
		wantRes, wantErr string
	}{
		{"from server/discover", wire.Message{Result: json.RawMessage(`{"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"ed","version":"2"},"instructions":"be kind"}}`)},
			`{"capabilities":{"tools":{"listChanged":true}},"instructions":"be kind","protocolVersion":"2025-06-18","serverInfo":{"name":"ed","version":"2"}}`, ""},
		{"none, in the carrier", wire.Message{Result: json.RawMessage(`{"error":{"code":-32601,"message":"no"}}`)}, declared, ""},
		{"none, refused", wire.Message{Error: json.RawMessage(`{"code":-32601,"message":"no"}`)}, declared, ""},
		{"failed, in the carrier", wire.Message{Result: json.RawMessage(`{"error":{"code":-32603,"message":"boom"}}`)}, "", `{"code":-32603,"message":"boom"}`},
		{"failed", wire.Message{Error: json.RawMessage(`{"code":-33001,"message":"gone"}`)}, "", `{"code":-33001,"message":"gone"}`},
		{"no carrier", wire.Message{Result: json.RawMessage(`{}`)}, "", `{"code":-33002,"message":"invalid MCP-over-ACP response carrier"}`},
	} {
		client := &mcpClient{}
		if c.name == "from server/discover" {
			client.version = "2025-06-18"
		}
		m := c.resp
		fromOutcome(&m)
		asInitialize(&m, client, "tools")
		if string(m.Result) != c.wantRes || string(m.Error) != c.wantErr {
			t.Errorf("%s: result %s error %s, want %s / %s", c.name, m.Result, m.Error, c.wantRes, c.wantErr)
		}
	}
}

// FuzzMCPTranslation feeds what peers send to the translations: params and
// results as the relay hands them over (valid JSON, which wire.Parse
// checks), of any shape; they do not panic, and what they make is valid
// JSON.
func FuzzMCPTranslation(f *testing.F) {
	f.Add([]byte(`{"cwd":"/","mcpServers":[{"type":"acp","name":"t","id":"s1"}]}`), []byte(`{"result":{"tools":[]}}`))
	f.Add([]byte(`{"name":"greet","_meta":{"progressToken":1}}`), []byte(`{"error":{"code":1,"message":"x"}}`))
	f.Add([]byte(`{"mcpServers":[{"type":"acp","serverId":7}]}`), []byte(`[]`))
	f.Add([]byte(`{"mcpServers":[{"type":"http","name":"tw","url":"acp:u","headers":[]}]}`), []byte(`{"connection_id":"c"}`))
	f.Fuzz(func(t *testing.T, params, result []byte) {
		if !json.Valid(params) || !json.Valid(result) {
			return
		}
		if out, err := acpForm(params); err == nil && !json.Valid(out) {
			t.Errorf("acpForm(%s) = %s", params, out)
		}
		_ = connectionIDOf(result, json.RawMessage(`"p"`))
		for _, spelling := range []string{"", "id", "serverId"} {
			out, err := respell(params, spelling)
			if err == nil && !json.Valid(out) {
				t.Errorf("respell(%s) = %s", params, out)
			}
		}
		out := withStatelessMeta(params, &mcpClient{capabilities: json.RawMessage(`{}`)})
		if !json.Valid(out) {
			t.Errorf("withStatelessMeta(%s) = %s", params, out)
		}
		_ = statelessRuleFor("tools/call", true, params)
		_ = progressToken(params)
		{
			m := &wire.Message{Result: result}
			fromOutcome(m)
			if (m.Result != nil && !json.Valid(m.Result)) || (m.Error != nil && !json.Valid(m.Error)) {
				t.Errorf("fromOutcome(%s) = %s / %s", result, m.Result, m.Error)
			}
			m = &wire.Message{Result: result}
			asOutcome(m)
			if !json.Valid(m.Result) {
				t.Errorf("asOutcome(%s) = %s", result, m.Result)
			}
			_ = initializeResult(&mcpClient{}, "s", result)
		}
	})
}
