package conductor

import (
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// What becomes of a session's MCP servers when the session ends: the
// connections the conductor opened for them are closed, whatever state
// they are in, nothing waiting on them is left unanswered, and a bridged
// server stops being reachable once no session declares it.

// sessionEnded fails t unless m answers the agent's request id with the
// conductor's error saying the session that declared the server ended.
func sessionEnded(t *testing.T, m *wire.Message, id string) {
	t.Helper()
	if string(m.ID) != id || m.Error == nil || errorCode(m.Error) != codeMCPServerUnavailable ||
		!strings.Contains(errorMessage(m.Error), `ended session "s1"`) {
		t.Fatalf("the agent got %s; want its request %s answered with an error saying session s1 ended", m.Bytes(), id)
	}
}

// TestMCPSessionEndsWhileOpening: a request-binding agent's first call to
// a connect-binding owner makes the conductor open the one connection
// such callers share; the session ends before the owner answers
// mcp/connect. When the answer comes, the connection is disconnected at
// once, the call is answered with an error naming why, and no route is
// kept for it: the owner's own request on it is refused as on any unknown
// connection.
func TestMCPSessionEndsWhileOpening(t *testing.T) {
	for _, end := range []string{"session/close", "session/delete"} {
		t.Run(end, func(t *testing.T) {
			ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
			ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/list","params":{}}}`)
			connect := ed.recvMsg()
			if connect.Method != methodMCPConnect {
				t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","id":"end","method":"` + end + `","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			if m := ed.recvMsg(); string(m.ID) != `"end"` || m.Error != nil {
				t.Fatalf("%s: the editor got %s", end, m.Bytes())
			}

			ed.reply(connect, `{"connectionId":"c1"}`)
			bye := ed.recvMsg()
			if bye.Method != methodMCPDisconnect || string(bye.Params) != `{"connectionId":"c1"}` {
				t.Fatalf("the connection opened after its session ended: the owner got %s; want mcp/disconnect for c1", bye.Bytes())
			}
			ed.reply(bye, `{}`)
			sessionEnded(t, ag.recvMsg(), "50")

			ed.send(`{"jsonrpc":"2.0","id":60,"method":"mcp/message","params":{"connectionId":"c1","method":"ping","params":{}}}`)
			if m := ed.recvMsg(); string(m.ID) != "60" || errorCode(m.Error) != codeInvalidParams ||
				!strings.Contains(errorMessage(m.Error), "unknown MCP connection") {
				t.Errorf("the owner's request on the disconnected connection got %s; want it refused as unknown", m.Bytes())
			}
		})
	}
}

// TestMCPSessionEndsWithCallInFlight: a request-binding agent's call is in
// flight on the connection the conductor shares for it when the session
// ends. The conductor disconnects the connection, so the owner may well
// never answer: the call is answered at once with an error naming why, and
// the owner's late answer goes nowhere.
func TestMCPSessionEndsWithCallInFlight(t *testing.T) {
	ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/call","params":{"name":"slow"}}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	call := ed.recvMsg()
	if _, method, _ := carried(t, call); method != "tools/call" {
		t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
	}

	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	bye := ed.recvMsg() // sent before the close's answer
	if bye.Method != methodMCPDisconnect {
		t.Fatalf("closing s1: the owner got %s; want mcp/disconnect", bye.Bytes())
	}
	if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
		t.Fatalf("session/close: the editor got %s", m.Bytes())
	}
	ed.reply(bye, `{}`)
	// The owner answers after all; then the editor asks the agent
	// something, which the agent gets next if that answer went nowhere.
	ed.reply(call, `{"content":[]}`)
	ed.send(`{"jsonrpc":"2.0","id":"next","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)

	sessionEnded(t, ag.recvMsg(), "50")
	if m := ag.recvMsg(); m.Method != "session/new" {
		t.Errorf("after its call was answered, the agent got %s; want the editor's session/new", m.Bytes())
	}
}
