package conductor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestMCPNative routes MCP-over-ACP between a native agent and a proxy two
// hops up the chain: connect, a tool call during which the server asks the
// client a question, an unknown connection, disconnect. The proxy in between
// never sees any of it.
func TestMCPNative(t *testing.T) {
	for _, spelling := range []string{"id", "serverId"} {
		t.Run(spelling, func(t *testing.T) {
			dir := t.TempDir()
			e := startChain(t, Config{
				Proxies: []Component{
					fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING="+spelling),
					fake(t, dir, "middle", "proxy"),
				},
				Agent: fake(t, dir, "agent", "mcp-agent"),
			})
			got := mcpReports(e)
			want := map[string]string{
				// An agent not yet heard from gets both spellings (respell).
				"declared": mustJSON([]map[string]any{{"_meta": map[string]any{"kept": true}, "id": "srv-1", "serverId": "srv-1", "name": "owner-tools", "type": "acp"}}),
				// The fake agent connects in the RFD's spelling when it sees it.
				"connect":    `{"connectionId":"conn-1","_meta":{"got":{"acpId":"srv-1","_meta":{"acp-conductor/sessionId":"s1"}}}}`,
				"call":       `{"content":[{"type":"text","text":"tool ran; client said {'answer':'yes'}"}]}`,
				"bogus":      `{"code":-32602,"message":"mcp/message: unknown MCP connection","data":{"connectionId":"no-such-conn"}}`,
				"disconnect": `{}`,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: got %s\nwant %s", k, got[k], v)
				}
			}
			e.close()
			sawNoMCP(t, dir, "middle")
		})
	}
}

// TestMCPBridgedStdio gives an agent without MCP-over-ACP the conductor's
// stdio shim in place of the acp declaration, and relays the MCP session it
// opens to the proxy that owns the server: a tool call during which the
// server asks the client a question, then the client going away.
func TestMCPBridgedStdio(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{
			fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING=id"),
			fake(t, dir, "middle", "proxy"),
		},
		Agent:     fake(t, dir, "agent", "mcp-stdio-agent"),
		MCPBridge: BridgeStdio,
	})
	got := mcpReports(e)
	var decl map[string]any
	json.Unmarshal([]byte(got["declared"]), &decl)
	exe, _ := os.Executable()
	if decl["command"] != exe || decl["name"] != "owner-tools" || decl["type"] != nil || decl["id"] != nil ||
		fmt.Sprint(decl["_meta"]) != "map[kept:true]" || fmt.Sprint(decl["args"]) != "[mcp-shim]" {
		t.Errorf("the agent was declared %s", got["declared"])
	}
	for k, v := range map[string]string{
		"list":      `{"tools":[{"name":"echo"}]}`,
		"asked":     `sampling/createMessage`,
		"call":      `{"content":[{"type":"text","text":"tool ran; client said {'answer':'yes'}"}]}`,
		"shim-exit": `<nil>`,
	} {
		if got[k] != v {
			t.Errorf("%s: got %s, want %s", k, got[k], v)
		}
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	owner, _ := os.ReadFile(filepath.Join(dir, "owner.txt"))
	for _, want := range []string{`"method":"mcp/connect","params":{"acpId":"srv-1","_meta":{"acp-conductor/sessionId":"s1"}}`, `"method":"mcp/disconnect","params":{"connectionId":"conn-1"}`} {
		if !strings.Contains(string(owner), want) {
			t.Errorf("owner never saw %s:\n%s", want, owner)
		}
	}
}

// TestMCPOwnerGone crashes the proxy that owns an MCP server in the middle
// of a tool call, under each policy that keeps the chain going. The call
// fails with an error naming the owner; then the connection is gone: a
// native agent's next message on it is answered with why (-33001: the
// owner was restarted, or bypassed) instead of reaching the restarted
// process (or the bypassed one), and a bridged
// client sees its shim's output end and the shim exit cleanly, without the
// new owner hearing of a connection it never opened. The server's bridged
// declaration is revoked, as at the end of its last session: a shim
// started with it again is refused at the handshake.
func TestMCPOwnerGone(t *testing.T) {
	for _, policy := range []Policy{PolicyRestart, PolicyBypass} {
		for _, agent := range []string{"mcp-agent", "mcp-stdio-agent"} {
			t.Run(string(policy)+"/"+agent, func(t *testing.T) {
				dir := t.TempDir()
				owner := fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING=id", "ACP_TEST_MCP_CRASH=1")
				owner.OnFailure = policy
				e := startChain(t, Config{
					Proxies:   []Component{owner, fake(t, dir, "middle", "proxy")},
					Agent:     fake(t, dir, "agent", agent, "ACP_TEST_MCP_CRASH=1"),
					MCPBridge: BridgeStdio,
				})
				last := map[string]string{"mcp-agent": "after", "mcp-stdio-agent": "reconnect-exit"}[agent]
				got := mcpReports(e, last)
				if !strings.Contains(got["call-failed"], `owner`) {
					t.Errorf("the failed call's error does not name the owner: %q", got["call-failed"])
				}
				how := map[Policy]string{PolicyRestart: "restarted", PolicyBypass: "bypassed"}[policy]
				want := map[string]string{
					"mcp-agent": `{"code":-33001,"message":"MCP connection \"conn-1\" ended: MCP server \"owner-tools\" is no longer available: owner, the proxy that served it, was ` + how +
						`","data":{"connectionId":"conn-1","serverId":"srv-1"}}`,
					"mcp-stdio-agent": "EOF",
				}[agent]
				if got["after"] != want {
					t.Errorf("after the owner went away, the client got %q, want %q", got["after"], want)
				}
				if agent == "mcp-stdio-agent" {
					if got["shim-exit"] != "<nil>" {
						t.Errorf("shim exit: %s", got["shim-exit"])
					}
					// A new connection with the old token is refused,
					// saying why to the client and on stderr, and no
					// goroutine stays behind for it.
					if !strings.Contains(got["reconnect"], `"id":1,"error":{"code":-33001,"message":"MCP server \"owner-tools\" is no longer available: owner, the proxy that served it, was `+how) ||
						got["reconnect-exit"] != "exit status 1" ||
						!strings.Contains(got["reconnect-stderr"], `refused this shim: MCP server "owner-tools" is no longer available: owner, the proxy that served it, was `+how) {
						t.Errorf("reconnecting after the owner went away: got %q, exit %s, stderr %q; want the shim refused at the handshake, saying why",
							got["reconnect"], got["reconnect-exit"], got["reconnect-stderr"])
					}
					if n := goroutinesIn("conductor.(*chain).serveBridged"); n != 0 {
						t.Errorf("%d bridged connections still served after their clients left", n)
					}
				}
				if err := e.close(); err != nil {
					t.Errorf("Run: %v", err)
				}
				// Nothing reached the owner after the call it crashed on.
				saw, _ := os.ReadFile(filepath.Join(dir, "owner.txt"))
				if i := strings.Index(string(saw), `"tools/call"`); i < 0 || strings.Contains(string(saw[i:]), `"method":"mcp/`) {
					t.Errorf("the owner saw MCP traffic after the call it crashed on:\n%s", saw)
				}
				sawNoMCP(t, dir, "middle")
			})
		}
	}
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn+"(") {
			count++
		}
	}
	return count
}

// mcpReports initializes the chain, opens a session and runs one prompt,
// and returns what the MCP test agents reported in their updates ("label
// rest"), by label: all of them once the prompt is answered or, if last is
// given, once the agent reported last.
func mcpReports(e *editor, last ...string) map[string]string {
	e.t.Helper()
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	got := map[string]string{}
	for {
		m := e.recvMsg()
		if m.IsResponse() && string(m.ID) == "2" {
			if len(last) == 0 {
				return got
			}
			continue // failed with a proxy it passed through; the agent goes on
		}
		if string(m.ID) == "1" {
			e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
			continue
		}
		label, rest, _ := strings.Cut(updateText(m), " ")
		got[label] = rest
		if len(last) > 0 && label == last[0] {
			return got
		}
	}
}

// TestMCPEditorOwner lets the editor own an acp MCP server: the native
// agent's mcp/connect and mcp/message reach the editor plainly, past a
// proxy that never sees them.
func TestMCPEditorOwner(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "middle", "proxy")},
		Agent:   fake(t, dir, "agent", "mcp-agent"),
	})
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"editor-tools","id":"ed-1"}]}}`)
	got := map[string]string{}
	for {
		m := e.recvMsg()
		switch {
		case m.IsResponse() && string(m.ID) == "1":
			e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
		case m.IsResponse() && string(m.ID) == "2":
			for k, v := range map[string]string{
				"connect":    `{"connectionId":"ed-conn"}`,
				"call":       `{"content":[{"type":"text","text":"from the editor"}]}`,
				"disconnect": `{}`,
			} {
				if got[k] != v {
					t.Errorf("%s: got %s, want %s", k, got[k], v)
				}
			}
			e.close()
			sawNoMCP(t, dir, "middle")
			return
		case m.Method == "mcp/connect":
			if string(m.Params) != `{"acpId":"ed-1","_meta":{"acp-conductor/sessionId":"s1"}}` {
				t.Errorf("mcp/connect params %s", m.Params)
			}
			e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"connectionId":"ed-conn"}}`)
		case m.Method == "mcp/message":
			e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"from the editor"}]}}`)
		case m.Method == "mcp/disconnect":
			e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`)
		case m.Method == "session/update":
			label, rest, _ := strings.Cut(updateText(m), " ")
			got[label] = rest
		default:
			t.Fatalf("unexpected %s", e.seen[len(e.seen)-1])
		}
	}
}

// TestMCPManyServers runs two servers with different owners (the editor and
// a proxy) in one session, with two connections to each, all at once: each
// message reaches the owner of its connection, and the proxy in between sees
// none of them. Owners choose connection ids on their own; when the editor
// picks the same ones as the proxy, the agent must still be able to tell the
// four connections apart, and each owner must only ever see its own ids.
func TestMCPManyServers(t *testing.T) {
	for _, tt := range []struct{ name, editorIDs string }{
		{"distinct ids", "ed-conn-%d"},
		{"the same ids", "conn-%d"}, // as the owner proxy gives
	} {
		t.Run(tt.name, func(t *testing.T) { testMCPManyServers(t, tt.editorIDs) })
	}
}

func testMCPManyServers(t *testing.T, editorIDs string) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{
			fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING=id"),
			fake(t, dir, "middle", "proxy"),
		},
		Agent: fake(t, dir, "agent", "mcp-many"),
	})
	e.send(initLine)
	e.recvMsg()
	// The owner proxy declares srv-1 in session/new (replacing the list);
	// the editor declares ed-1 in session/load, which the proxy passes on.
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[{"type":"acp","name":"editor-tools","id":"ed-1"}]}}`)
	editorConns := 0
	given := map[string]bool{} // connection ids the editor gave
	for {
		m := e.recvMsg()
		switch {
		case m.IsResponse() && string(m.ID) == "2":
			e.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
		case m.IsResponse() && string(m.ID) == "3":
			e.close()
			sawNoMCP(t, dir, "middle")
			return
		case m.Method == "mcp/connect":
			editorConns++
			id := fmt.Sprintf(editorIDs, editorConns)
			given[id] = true
			e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"connectionId":%q}}`, m.ID, id))
		case m.Method == "mcp/message" || m.Method == "mcp/disconnect":
			var p struct{ ConnectionID string }
			json.Unmarshal(m.Params, &p)
			if !given[p.ConnectionID] {
				t.Errorf("the editor got %s for connection %q, which it never gave", m.Method, p.ConnectionID)
			}
			result := `{}`
			if m.Method == "mcp/message" {
				result = `{"tools":[{"name":"editor-tool"}]}`
			}
			e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
		case m.Method == "session/update":
			var report map[string]string // the agent's connection ids: server and answer
			json.Unmarshal([]byte(updateText(m)), &report)
			answered := map[string]int{}
			for _, v := range report {
				answered[v]++
			}
			want := map[string]int{
				`ed-1 {"tools":[{"name":"editor-tool"}]}`: 2,
				`srv-1 {"tools":[{"name":"echo"}]}`:       2,
			}
			if len(report) != 4 || fmt.Sprint(answered) != fmt.Sprint(want) {
				t.Errorf("connections answered by:\n%v\nwant two for each server, by its owner", report)
			}
		default:
			t.Fatalf("unexpected %s", e.seen[len(e.seen)-1])
		}
	}
}

// sawNoMCP fails t if the fake named name, a proxy between an MCP server's
// owner and the agent, saw any MCP-over-ACP traffic.
func sawNoMCP(t *testing.T, dir, name string) {
	t.Helper()
	seen, _ := os.ReadFile(filepath.Join(dir, name+".txt"))
	if strings.Contains(string(seen), `"method":"mcp/`) || strings.Contains(string(seen), `"method":"_mcp/`) {
		t.Errorf("the proxy in between saw MCP traffic:\n%s", seen)
	}
}

// TestMCPRequestCallerConnectOwner translates a request-binding agent's
// call to a connect-binding owner: one connection, opened on the first
// call; the answer in the {result} carrier; the owner's own question to the
// client refused, as stateless MCP clients take none; and the connection
// closed when the session is.
func TestMCPRequestCallerConnectOwner(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING=serverId"), fake(t, dir, "middle", "proxy")},
		Agent:   fake(t, dir, "agent", "mcp-req-agent"),
	})
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}`)
	e.recv()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	var call string
	for m := e.recvMsg(); !m.IsResponse(); m = e.recvMsg() {
		if label, rest, _ := strings.Cut(updateText(m), " "); label == "call" {
			call = rest
		}
	}
	want := `{"result":{"content":[{"type":"text","text":"tool ran; client said "}]}}`
	if call != want {
		t.Errorf("the agent's call got %s, want %s", call, want)
	}
	e.send(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"s1"}}`)
	if m := e.recvMsg(); string(m.ID) != "3" || m.Error != nil {
		t.Fatalf("session/close: %s", e.seen[len(e.seen)-1])
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	owner, _ := os.ReadFile(filepath.Join(dir, "owner.txt"))
	for _, want := range []string{
		`"method":"mcp/connect","params":{"serverId":"srv-1","_meta":{"acp-conductor/requestBinding":true,"acp-conductor/sessionId":"s1"}}`,
		`"method":"mcp/message","params":{"connectionId":"conn-1","method":"tools/call","params":{"name":"echo",`,
		`"id":900,"error":{"code":-32601,`,
		`"method":"mcp/disconnect","params":{"connectionId":"conn-1"}`,
	} {
		if !strings.Contains(string(owner), want) {
			t.Errorf("owner never saw %s:\n%s", want, owner)
		}
	}
	if n := strings.Count(string(owner), `"mcp/connect"`); n != 1 {
		t.Errorf("owner saw %d mcp/connect, want 1", n)
	}
	sawNoMCP(t, dir, "middle")
}

// TestMCPThinkwellOwner serves an MCP server from a Thinkwell-dialect
// proxy, declared {"type":"http","url":"acp:<uuid>"} and spoken to over
// _mcp/*, as @thinkwell/conductor's proxies and as sacp's read it, through
// an RFD proxy and a Rust-dialect one, to a native agent of either binding
// and to a bridged one. The agent sees an acp declaration; the owner sees
// _mcp/connect in its own spelling and _mcp/disconnect as a notification,
// and the proxies in between see no MCP traffic.
func TestMCPThinkwellOwner(t *testing.T) {
	const url = "acp:6f1c2a9e-0d7b-4c55-9a43-2b8e5d1f7a60"
	// Both spellings go out; each flavour reads its own, and the
	// connectionId @thinkwell/conductor's proxies keep, sacp's replace.
	// The connection the conductor opens for a request-binding agent says
	// so (metaRequestBinding).
	connect := func(agent string) string {
		meta := `{"acp-conductor/sessionId":"s1"}`
		if agent == "mcp-req-agent" {
			meta = `{"acp-conductor/requestBinding":true,"acp-conductor/sessionId":"s1"}`
		}
		return `"method":"_mcp/connect","params":{"connectionId":"acp-conductor:1","url":"` + url + `","acp_url":"` + url + `","_meta":` + meta + `}}`
	}
	conn := map[string]string{"thinkwell": "acp-conductor:1", "sacp": "tw-conn-1"}
	for _, flavor := range []string{"thinkwell", "sacp"} {
		for _, agent := range []string{"mcp-agent", "mcp-req-agent", "mcp-stdio-agent"} {
			t.Run(flavor+"/"+agent, func(t *testing.T) {
				dir := t.TempDir()
				cfg := Config{
					Proxies: []Component{
						fake(t, dir, "owner", "thinkwell", "ACP_TEST_TW_MCP="+flavor),
						fake(t, dir, "rfd", "proxy"),
						fake(t, dir, "rust", "proxy", "ACP_TEST_RUST_ONLY=1"),
					},
					Agent: fake(t, dir, "agent", agent),
				}
				if agent == "mcp-stdio-agent" {
					cfg.MCPBridge = BridgeStdio
				}
				e := startChain(t, cfg)
				got := mcpReports(e)
				want := map[string]string{}
				switch agent {
				case "mcp-agent":
					want = map[string]string{
						"declared":   mustJSON([]map[string]any{{"id": url, "serverId": url, "name": "tw-tools", "type": "acp"}}),
						"call":       `{"content":[{"type":"text","text":"tool ran; client said {'answer':'yes'}"}]}`,
						"disconnect": `{}`,
					}
					var r struct{ ConnectionID string }
					if json.Unmarshal([]byte(got["connect"]), &r); r.ConnectionID != conn[flavor] {
						t.Errorf("connect: got %s, want connectionId %s", got["connect"], conn[flavor])
					}
				case "mcp-req-agent":
					// The owner's question to a stateless client is refused.
					want = map[string]string{"call": `{"result":{"content":[{"type":"text","text":"tool ran; client said "}]}}`}
				case "mcp-stdio-agent":
					want = map[string]string{
						"list":      `{"tools":[{"name":"echo"}]}`,
						"asked":     `sampling/createMessage`,
						"call":      `{"content":[{"type":"text","text":"tool ran; client said {'answer':'yes'}"}]}`,
						"shim-exit": `<nil>`,
					}
				}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: got %s\nwant %s", k, got[k], v)
					}
				}
				if agent == "mcp-req-agent" {
					e.send(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"s1"}}`)
					if m := e.recvMsg(); string(m.ID) != "3" || m.Error != nil {
						t.Fatalf("session/close: %s", e.seen[len(e.seen)-1])
					}
				}
				if err := e.close(); err != nil {
					t.Errorf("Run: %v", err)
				}
				owner, _ := os.ReadFile(filepath.Join(dir, "owner.txt"))
				bye := `{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_mcp/disconnect","params":{"connectionId":"` +
					conn[flavor] + `","connection_id":"` + conn[flavor] + `"}}}`
				for _, want := range []string{connect(agent), `"method":"_mcp/message","params":{"connectionId":"` + conn[flavor] + `","method":"tools/call"`, bye} {
					if !strings.Contains(string(owner), want) {
						t.Errorf("owner never saw %s:\n%s", want, owner)
					}
				}
				if strings.Contains(string(owner), `"method":"mcp/`) {
					t.Errorf("owner saw MCP methods of another dialect:\n%s", owner)
				}
				sawNoMCP(t, dir, "rfd")
				sawNoMCP(t, dir, "rust")
			})
		}
	}
}

// parentHarness plays the parent of a proxy-mode conductor. next reads the
// next message, which must be a request or notification of method (in an
// envelope of any dialect: wrapped) whose params contain want; answer
// answers it; reply reads the conductor's answer to the parent's request
// id, which must contain want.
func parentHarness(t *testing.T, e *editor) (next func(wrapped bool, method, want string) *wire.Message, answer func(*wire.Message, string), reply func(id, want string)) {
	next = func(wrapped bool, method, want string) *wire.Message {
		t.Helper()
		m := e.recvMsg()
		got, params := m.Method, m.Params
		if wrapped && wire.IsSuccessor(m.Method) {
			got, params, _ = wire.Unwrap(m.Params)
		}
		if got != method || wire.IsSuccessor(m.Method) != wrapped || !strings.Contains(string(params), want) {
			t.Fatalf("want %s (wrapped: %v) with %s, got %s", method, wrapped, want, e.seen[len(e.seen)-1])
		}
		return m
	}
	answer = func(m *wire.Message, result string) {
		e.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
	}
	reply = func(id, want string) {
		t.Helper()
		if m := e.recvMsg(); string(m.ID) != id || !strings.Contains(string(m.Result), want) {
			t.Fatalf("want the answer to %s with %s, got %s", id, want, e.seen[len(e.seen)-1])
		}
	}
	return next, answer, reply
}

// TestMCPParentOwner runs a proxy-mode conductor whose parent owns an MCP
// server: the parent (the test) declares it in session/new, then delivers
// the agent's MCP traffic from the successor side, as a parent that routes
// by position does (@thinkwell/conductor sends _mcp/* to its last proxy).
// The conductor sends it back to its owner, plain, as from its first
// component: mcp/connect with the session, messages on the connection, the
// owner's own question to the agent going down wrapped, and a
// request-binding call translated onto a connection of its own.
func TestMCPParentOwner(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{Mode: ProxyMode, Proxies: []Component{fake(t, dir, "inner", "proxy")}})
	next, answer, reply := parentHarness(t, e)

	e.send(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}`)
	answer(next(true, "initialize", `"protocolVersion":1`), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	reply("0", `"protocolVersion":1`)
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"parent-tools","serverId":"srv-p"}]}}`)
	answer(next(true, "session/new", `{"type":"acp","name":"parent-tools","serverId":"srv-p"}`), `{"sessionId":"s1"}`)
	reply("1", `"sessionId":"s1"`)

	// The connect binding.
	e.send(`{"jsonrpc":"2.0","id":10,"method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"srv-p"}}}`)
	answer(next(false, "mcp/connect", `{"serverId":"srv-p","_meta":{"acp-conductor/sessionId":"s1"}}`), `{"connectionId":"c-p"}`)
	reply("10", `{"connectionId":"c-p"}`)
	e.send(`{"jsonrpc":"2.0","id":11,"method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"c-p","method":"tools/call","params":{"name":"echo"}}}}`)
	call := next(false, "mcp/message", `{"connectionId":"c-p","method":"tools/call"`)
	// The owner asks the agent something first.
	e.send(`{"jsonrpc":"2.0","id":12,"method":"mcp/message","params":{"connectionId":"c-p","method":"sampling/createMessage","params":{}}}`)
	answer(next(true, "mcp/message", `{"connectionId":"c-p","method":"sampling/createMessage"`), `{"answer":"yes"}`)
	reply("12", `{"answer":"yes"}`)
	answer(call, `{"content":[{"type":"text","text":"ran"}]}`)
	reply("11", `"text":"ran"`)

	// The request binding, onto a connection of the conductor's own.
	e.send(`{"jsonrpc":"2.0","id":13,"method":"proxy/successor","params":{"method":"mcp/message","params":{"serverId":"srv-p","requestId":"r1","method":"tools/call","params":{"name":"echo"}}}}`)
	answer(next(false, "mcp/connect", `{"serverId":"srv-p","_meta":{"acp-conductor/requestBinding":true,"acp-conductor/sessionId":"s1"}}`), `{"connectionId":"c-p2"}`)
	answer(next(false, "mcp/message", `{"connectionId":"c-p2","method":"tools/call"`), `{"content":[{"type":"text","text":"ran again"}]}`)
	reply("13", `{"result":{"content":[{"type":"text","text":"ran again"}]}}`)

	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	sawNoMCP(t, dir, "inner")
}

// TestMCPThinkwellParentOwner is TestMCPParentOwner with a parent of the
// Thinkwell dialect (@thinkwell/conductor): it initializes the conductor
// with a marked initialize, declares its server by acp: URL, connects by
// URL proposing a connectionId, and disconnects with a notification; the
// conductor speaks _mcp/* back to it.
func TestMCPThinkwellParentOwner(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{Mode: ProxyMode, Proxies: []Component{fake(t, dir, "inner", "proxy")}})
	next, answer, reply := parentHarness(t, e)
	const url = "acp:0c6b1d52-4f0e-4a8e-9a7b-d2f3e1c4b5a6"

	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	answer(next(true, "initialize", `"protocolVersion":1`), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	reply("0", `"protocolVersion":1`)
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"http","name":"tw-tools","url":"` + url + `","headers":[]}]}}`)
	answer(next(true, "session/new", `{"type":"http","name":"tw-tools","url":"`+url+`","headers":[]}`), `{"sessionId":"s1"}`)
	reply("1", `"sessionId":"s1"`)

	e.send(`{"jsonrpc":"2.0","id":10,"method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"tw-1","url":"` + url + `"}}}`)
	answer(next(false, "_mcp/connect", `{"connectionId":"tw-1","url":"`+url+`","acp_url":"`+url+`","_meta":{"acp-conductor/sessionId":"s1"}}`),
		`{"connectionId":"tw-1","serverInfo":{"name":"tw-tools","version":"0.1.0"}}`)
	reply("10", `"connectionId":"tw-1"`)
	e.send(`{"jsonrpc":"2.0","id":11,"method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{"connectionId":"tw-1","method":"tools/call","params":{"name":"echo"}}}}`)
	answer(next(false, "_mcp/message", `{"connectionId":"tw-1","method":"tools/call"`), `{"content":[{"type":"text","text":"ran"}]}`)
	reply("11", `"text":"ran"`)
	e.send(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_mcp/disconnect","params":{"connectionId":"tw-1"}}}`)
	if m := next(false, "_mcp/disconnect", `{"connectionId":"tw-1","connection_id":"tw-1"}`); !m.IsNotification() {
		t.Errorf("_mcp/disconnect reached the owner as a request: %s", e.seen[len(e.seen)-1])
	}

	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	sawNoMCP(t, dir, "inner")
}

// TestMCPInnerOwnerThinkwellParent runs a proxy-mode conductor, whose proxy
// owns an MCP server, under a parent of the Thinkwell dialect, which reads
// only acp: URL declarations: the server reaches the parent as one. The
// parent connects by that URL proposing a connectionId; the owner, which
// spells the RFD's way, gets the connect in its own spelling with the
// proposal, answers with an id of its own, and the parent keeps using its
// proposal, which the conductor maps.
func TestMCPInnerOwnerThinkwellParent(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{Mode: ProxyMode, Proxies: []Component{fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING=serverId")}})
	next, answer, reply := parentHarness(t, e)

	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	answer(next(true, "initialize", `"protocolVersion":1`), `{"protocolVersion":1,"agentCapabilities":{}}`)
	reply("0", `"protocolVersion":1`)
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	answer(next(true, "session/new", `"mcpServers":[{"_meta":{"kept":true},"headers":[],"name":"owner-tools","type":"http","url":"acp:srv-1"}]`), `{"sessionId":"s1"}`)
	reply("1", `"sessionId":"s1"`)

	e.send(`{"jsonrpc":"2.0","id":10,"method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"tw-1","url":"acp:srv-1"}}}`)
	reply("10", `"connectionId":"tw-1"`)
	e.send(`{"jsonrpc":"2.0","id":11,"method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{"connectionId":"tw-1","method":"tools/list"}}}`)
	reply("11", `{"tools":[{"name":"echo"}]}`)

	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	owner, _ := os.ReadFile(filepath.Join(dir, "owner.txt"))
	for _, want := range []string{
		`"method":"mcp/connect","params":{"connectionId":"tw-1","serverId":"srv-1","_meta":{"acp-conductor/sessionId":"s1"}}`,
		`"method":"mcp/message","params":{"connectionId":"conn-1","method":"tools/list"}`,
	} {
		if !strings.Contains(string(owner), want) {
			t.Errorf("the owner never saw %s:\n%s", want, owner)
		}
	}
}

// TestMCPRequestOwnerThinkwellParent runs a proxy-mode conductor whose
// proxy owns an MCP server over the request binding (as the TypeScript
// SDK's McpOverAcpProvider does) under a parent of the Thinkwell dialect.
// The parent proposes its connectionId, never reads the answer's, and
// sends on the connection before its _mcp/connect is answered, as
// @thinkwell/conductor does: what it sends waits until the owner's answer
// tells its binding, and the connection the conductor makes for the
// parent keeps the proposed id, the first time and once the binding is
// known.
func TestMCPRequestOwnerThinkwellParent(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{Mode: ProxyMode, Proxies: []Component{fake(t, dir, "owner", "mcp-req-owner")}})
	next, answer, _ := parentHarness(t, e)
	reply := func(id, want string) {
		t.Helper()
		for {
			m := e.recvMsg()
			if m.IsNotification() {
				continue // the owner's progress, on the connection
			}
			if string(m.ID) != id || !strings.Contains(string(m.Result), want) {
				t.Fatalf("want the answer to %s with %s, got %s", id, want, e.seen[len(e.seen)-1])
			}
			return
		}
	}

	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	answer(next(true, "initialize", `"protocolVersion":1`), `{"protocolVersion":1,"agentCapabilities":{}}`)
	reply("0", `"protocolVersion":1`)
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	answer(next(true, "session/new", `"url":"acp:srv-r"`), `{"sessionId":"s1"}`)
	reply("1", `"sessionId":"s1"`)

	for i, cid := range []string{"tw-1", "tw-2"} {
		connect, call := strconv.Itoa(10+2*i), strconv.Itoa(11+2*i)
		e.send(`{"jsonrpc":"2.0","id":` + connect + `,"method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"` + cid + `","url":"acp:srv-r"}}}`)
		e.send(`{"jsonrpc":"2.0","id":` + call + `,"method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{"connectionId":"` + cid + `","method":"tools/list","params":{},"id":1}}}`)
		reply(connect, `"connectionId":"`+cid+`"`)
		reply(call, `"text":"echoed"`)
	}

	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestConnErrorForWholeID: an owner's id renamed in its message is the
// whole id: owner id 1 is not the start of "connection 12", another
// connection its error names.
func TestConnErrorForWholeID(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"MCP connection 1 ended: connection 12 failed", `MCP connection "mine" ended: connection 12 failed`},
		{"connection 1.5 and connection 1e3, then connection 1", `connection 1.5 and connection 1e3, then connection "mine"`},
		{"connection 1", `connection "mine"`},
	} {
		msg, _ := json.Marshal(tc.msg)
		e := json.RawMessage(`{"code":-32603,"message":` + string(msg) + `,"data":{"connectionId":1}}`)
		var got struct{ Message string }
		if err := json.Unmarshal(connErrorFor(e, "1", `"mine"`), &got); err != nil || got.Message != tc.want {
			t.Errorf("connErrorFor(%q) message = %q, %v; want %q", tc.msg, got.Message, err, tc.want)
		}
	}
}

// TestConnErrorForOddIDs: an owner chooses its connection ids, and may
// give an object or an array, which cannot be compared as strings and
// numbers are: its error is renamed all the same, never a panic.
func TestConnErrorForOddIDs(t *testing.T) {
	for _, id := range []string{`{"a":1}`, `[1,2]`, `"c\u0031"`, `7`} {
		msg, _ := json.Marshal("connection " + id + " ended")
		e := json.RawMessage(`{"code":-32603,"message":` + string(msg) + `,"data":{"connectionId":` + id + `}}`)
		got := connErrorFor(e, id, `"mine"`)
		if !strings.Contains(string(got), `"connectionId":"mine"`) {
			t.Errorf("connErrorFor(%s) = %s, want it to name \"mine\"", id, got)
		}
	}
	e := json.RawMessage(`{"code":1,"message":"m","data":{"connectionId":{"a":2}}}`)
	if got := connErrorFor(e, `{"a":1}`, `"mine"`); string(got) != string(e) {
		t.Errorf("another id was renamed: %s", got)
	}
}
