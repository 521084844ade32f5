package conductor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

const sessionNewLine = `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`

// initialized checks the editor's answer to initLine: the agent's result,
// not an error.
func initialized(t *testing.T, e *editor, agentSaid string) {
	t.Helper()
	m := e.recvMsg()
	if string(m.ID) != "0" || m.Error != nil || !strings.Contains(string(m.Result), agentSaid) {
		t.Fatalf("initialize answered %s, want the agent's result (%s)", e.seen[len(e.seen)-1], agentSaid)
	}
}

// TestInitializeOutlivesProxy has a proxy die once it has read its
// proxy/initialize, before it answers it or passes it on. Under restart
// and bypass the editor's initialize is answered all the same, with the
// agent's result, and a session can be opened. The proxy is a shell that
// reads one line and exits; restarted, it is a fake proxy. It is the only
// proxy; or behind another, whose initialize is then the one pending on
// it; or before another, which a bypass initializes in its place.
func TestInitializeOutlivesProxy(t *testing.T) {
	for _, policy := range []Policy{PolicyRestart, PolicyBypass} {
		for _, shape := range []string{"alone", "behind", "before"} {
			t.Run(string(policy)+"/"+shape, func(t *testing.T) {
				dir := t.TempDir()
				crashy := fake(t, dir, "crashy", "proxy", "ACP_TEST_MARK="+filepath.Join(dir, "ran"))
				crashy.Args = []string{"-c", `if [ -e "$ACP_TEST_MARK" ]; then exec "$0"; fi; : >"$ACP_TEST_MARK"; read -r line; echo boom >&2; exit 2`, crashy.Command}
				crashy.Command = "sh"
				crashy.OnFailure = policy
				cfg := Config{Agent: fake(t, dir, "agent", "streamer"), RestartBackoff: time.Millisecond}
				switch shape {
				case "alone":
					cfg.Proxies = []Component{crashy}
				case "behind":
					cfg.Proxies = []Component{fake(t, dir, "other", "proxy"), crashy}
				case "before":
					cfg.Proxies = []Component{crashy, fake(t, dir, "other", "proxy")}
				}
				e := startChain(t, cfg)
				e.send(initLine)
				initialized(t, e, `"protocolVersion":1,"agentCapabilities":{`)
				e.send(sessionNewLine)
				if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil || !strings.Contains(string(m.Result), `"sessionId":"s1"`) {
					t.Errorf("session/new answered %s", e.seen[len(e.seen)-1])
				}
				if err := e.close(); err != nil {
					t.Errorf("Run: %v", err)
				}
				// The agent was initialized once: through the restarted
				// proxy, or in the bypassed proxy's place.
				agentSaw, _ := os.ReadFile(filepath.Join(dir, "agent.txt"))
				if n := strings.Count(string(agentSaw), `"method":"initialize"`); n != 1 {
					t.Errorf("the agent saw %d initialize, want 1", n)
				}
				if shape == "before" {
					otherSaw, _ := os.ReadFile(filepath.Join(dir, "other.txt"))
					if n := strings.Count(string(otherSaw), `"method":"proxy/initialize"`); n != 1 {
						t.Errorf("the proxy after the failed one saw %d proxy/initialize, want 1", n)
					}
				}
			})
		}
	}
}

// TestInitializeOutlivesProxyMidway has a proxy pass the editor's
// initialize on and die once the agent's answer has reached it, before it
// answers in turn. Restarted, the proxy's replayed initialization is
// answered from what the agent said, and its answer is the editor's;
// bypassed, the agent is asked again, by the conductor, and its answer is
// the editor's. Either way a session can then be opened.
func TestInitializeOutlivesProxyMidway(t *testing.T) {
	const agentInit = `{"protocolVersion":1,"agentCapabilities":{"_meta":{"x.test/agent":true}}}`
	for _, policy := range []Policy{PolicyRestart, PolicyBypass} {
		t.Run(string(policy), func(t *testing.T) {
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			proxy.OnFailure = policy
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, RestartBackoff: time.Millisecond})
			p, a := proxyStarted(), agentStarted()
			// forward has the proxy pass its next request on, and returns
			// the request.
			forward := func(p *scripted) *wire.Message {
				t.Helper()
				m := p.recvMsg()
				p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":%q,"params":%s}}`, strings.TrimPrefix(m.Method, "proxy/"), m.Params))
				return m
			}

			e.send(initLine)
			forward(p)
			a.reply(a.recvMsg(), agentInit)
			p.recvMsg() // the agent's answer
			p.w.Close() // the proxy dies
			switch policy {
			case PolicyRestart:
				p = proxyStarted()
				replay := forward(p)
				answer := p.recvMsg() // from the conductor's record: the agent is not asked again
				p.reply(replay, string(answer.Result))
			case PolicyBypass:
				a.reply(a.recvMsg(), agentInit)
			}
			initialized(t, e, `"x.test/agent":true`)

			e.send(sessionNewLine)
			if policy == PolicyRestart {
				newSession := forward(p)
				a.reply(a.recvMsg(), `{"sessionId":"s1"}`)
				p.reply(newSession, string(p.recvMsg().Result))
			} else {
				a.reply(a.recvMsg(), `{"sessionId":"s1"}`)
			}
			if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil || !strings.Contains(string(m.Result), `"sessionId":"s1"`) {
				t.Errorf("session/new answered %s", e.seen[len(e.seen)-1])
			}
		})
	}
}

// TestInitializeRestartLimit has a proxy die at every start once it has
// read its proxy/initialize: the editor's initialize waits through each
// restart, and when the restart limit is spent it fails with an error that
// names the proxy, its exit status, and why it was not restarted again.
func TestInitializeRestartLimit(t *testing.T) {
	dir := t.TempDir()
	crasher := Component{Name: "crasher", Command: "sh", Args: []string{"-c", "read -r line; echo boom >&2; exit 7"}, OnFailure: PolicyRestart}
	e := startChain(t, Config{
		Proxies:        []Component{crasher},
		Agent:          fake(t, dir, "agent", "streamer"),
		RestartLimit:   2,
		RestartBackoff: time.Millisecond,
	})
	e.send(initLine)
	m := e.recvMsg()
	for _, want := range []string{`crasher`, `exit status 7`, `not restarted: restarted 2 times within`} {
		if string(m.ID) != "0" || !strings.Contains(string(m.Error), want) {
			t.Errorf("initialize answered %s, want an error saying %q", e.seen[len(e.seen)-1], want)
		}
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), "crasher") {
		t.Errorf("Run = %v, want the chain to fail naming crasher", err)
	}
}
