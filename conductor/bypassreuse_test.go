package conductor

import (
	"strings"
	"testing"
)

// TestBypassResendReusedID: an editor that reuses an id while the
// requests under it are pending on a proxy that is then bypassed gets
// one answer for each, the right one: the initializes resent past the
// proxy are answered by what the agent answered each (in the agent's
// order), the session/new that is not resent by its error, and a
// cancel by the id reaches the newest of them still open, as the agent
// knows it.
func TestBypassResendReusedID(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered", true: "cancelled"}[cancel], func(t *testing.T) {
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			proxy.OnFailure = PolicyBypass
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent})
			p, a := proxyStarted(), agentStarted()
			e.send(clientInit(0, "a"))
			p.recvMsg()
			e.send(clientInit(0, "b"))
			p.recvMsg()
			e.send(`{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			if m := p.recvMsg(); m.Method != "session/new" {
				t.Fatalf("the proxy got %s, want the session/new", m.Raw)
			}
			p.w.Close() // the proxy dies holding all three
			ma, mb := a.recvMsg(), a.recvMsg()
			if !strings.Contains(string(ma.Params), `"a"`) || !strings.Contains(string(mb.Params), `"b"`) {
				t.Fatalf("the agent got %s then %s, want the initializes of a then b", ma.Raw, mb.Raw)
			}
			if cancel {
				e.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}`)
				if got, want := string(a.recvLine()), `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":`+string(mb.ID)+`}}`; got != want {
					t.Errorf("the agent got %s, want %s", got, want)
				}
			}
			a.reply(mb, `{"protocolVersion":1,"agentInfo":{"name":"for-b"}}`)
			a.reply(ma, `{"protocolVersion":1,"agentInfo":{"name":"for-a"}}`)
			e.send(`{"jsonrpc":"2.0","id":9,"method":"x/ping"}`) // a marker: all before it has come
			a.reply(a.recvMsg(), `{}`)
			var got []string
			for m := e.recvMsg(); string(m.ID) != "9"; m = e.recvMsg() {
				if string(m.ID) != "0" {
					t.Errorf("the editor got %s", m.Raw)
				}
				switch {
				case m.Error != nil:
					got = append(got, "error")
				case strings.Contains(string(m.Result), `"for-a"`):
					got = append(got, "a")
				case strings.Contains(string(m.Result), `"for-b"`):
					got = append(got, "b")
				default:
					t.Errorf("the editor got %s", m.Raw)
				}
			}
			// The error may come before or between the others: it is the
			// conductor's, the others the agent's, in its order.
			if s := strings.Join(got, " "); s != "error b a" && s != "b error a" && s != "b a error" {
				t.Errorf("the editor got answers %q under id 0, want b's then a's, and the session/new's error", got)
			}
		})
	}
}
