package conductor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestInitializeBypassedToGoneAgent has the agent exit while the editor's
// initialize is pending on a proxy that holds it, which stops the chain;
// then the proxy dies too, and is bypassed all the same, as the chain is
// draining and not yet stopping its components. The initialize goes on
// toward the agent, which can no longer answer it: the editor's error names
// the agent and how it ended, not the proxy it was pending on.
//
// Which of three ways the conductor finds that out depends on how its
// goroutines interleave: the agent already marked gone (the re-sent call
// cannot register), the editor's requests already refused (the drain's
// refusal, which is the agent's failure), or the agent's failure not yet
// handled (its policy fails the re-sent call). All three answer alike,
// which is what the test checks; none can be chosen without a hook.
func TestInitializeBypassedToGoneAgent(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "crashy")
	proxy.OnFailure = PolicyBypass
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	agent.Env["ACP_TEST_PIPE_EXIT"] = "5"
	// The drain waits for the editor's initialize: it never runs out here.
	e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, GracePeriod: time.Minute})
	p, a := proxyStarted(), agentStarted()

	e.send(initLine)
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("the proxy got %s, want its proxy/initialize", m.Bytes())
	}
	a.w.Close() // the agent exits with status 5; its policy stops the chain
	p.w.Close() // the proxy, holding the initialize, dies
	m := e.recvMsg()
	want := `component \"agent\" ended unexpectedly (exit status 5)`
	if string(m.ID) != "0" || !strings.Contains(string(m.Error), want) || strings.Contains(string(m.Error), "crashy") {
		t.Errorf("initialize answered %s, want an error saying %s, not naming crashy", e.seen[len(e.seen)-1], want)
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), `"agent"`) {
		t.Errorf("Run = %v, want the agent's failure", err)
	}
}

// TestInitializeBypassedToGoneSuccessor has a proxy's initialize, passed
// on to the next proxy, pending there when the agent has failed (its
// policy stops the chain) and that proxy dies: bypassed, as the chain is
// still draining, the initialize is sent on to the agent, which is gone,
// and the first proxy's error names the agent and how it ended. The
// middle proxy's own request to the agent, failed by the agent's end,
// shows the agent is gone before the middle proxy dies.
func TestInitializeBypassedToGoneSuccessor(t *testing.T) {
	dir := t.TempDir()
	first, firstStarted := scriptedComponent(t, dir, "first")
	crashy, crashyStarted := scriptedComponent(t, dir, "crashy")
	crashy.OnFailure = PolicyBypass
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	agent.Env["ACP_TEST_PIPE_EXIT"] = "5"
	// The drain waits for the editor's initialize: it never runs out here.
	e := startChain(t, Config{Proxies: []Component{first, crashy}, Agent: agent, GracePeriod: time.Minute})
	f, p, a := firstStarted(), crashyStarted(), agentStarted()

	e.send(initLine)
	init := f.recvMsg()
	f.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(init.Params) + `}}`)
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("crashy got %s, want its proxy/initialize", m.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":9,"method":"proxy/successor","params":{"method":"x/hold","params":{}}}`)
	if m := a.recvMsg(); m.Method != "x/hold" {
		t.Fatalf("the agent got %s, want x/hold", m.Bytes())
	}
	a.w.Close() // the agent exits with status 5; its policy stops the chain
	want := `component \"agent\" ended unexpectedly (exit status 5)`
	if m := p.recvMsg(); string(m.ID) != "9" || !strings.Contains(string(m.Error), want) {
		t.Fatalf("crashy's x/hold answered %s %s, want the agent's failure", m.ID, m.Error)
	}
	p.w.Close() // crashy, holding first's initialize, dies
	if m := f.recvMsg(); string(m.ID) != "1" || !strings.Contains(string(m.Error), want) || strings.Contains(string(m.Error), "crashy") {
		t.Errorf("first's initialize answered %s, want an error saying %s, not naming crashy", m.Bytes(), want)
	}
	f.send(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"error":{"code":-32603,"message":"no successor"}}`)
	e.recvMsg()
	f.w.Close()
	if err := e.close(); err == nil || !strings.Contains(err.Error(), `"agent"`) {
		t.Errorf("Run = %v, want the agent's failure", err)
	}
}

// clientInit is the editor's initialize under id, from the client named
// name: initializes that differ in their params.
func clientInit(id int, name string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":%q}}}`, id, name)
}

// answerInit has the agent answer its next request, which must be an
// initialize from the client named name, with an answer for that client.
func answerInit(t *testing.T, a *scripted, name string) {
	t.Helper()
	m := a.recvMsg()
	if m.Method != wire.MethodInitialize || !strings.Contains(string(m.Params), `"name":"`+name+`"`) {
		t.Fatalf("the agent got %s, want the initialize of client %s", m.Bytes(), name)
	}
	a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-`+name+`"}}`)
}

// forwardInit has a scripted proxy take its next request, which must be
// its proxy/initialize from the client named name, pass it on, and answer
// it with its successor's answer, which answer (the agent's turn) brings
// about: nil when the conductor answers from its record.
func forwardInit(t *testing.T, p *scripted, name string, answer func()) {
	t.Helper()
	m := p.recvMsg()
	if m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"`+name+`"`) {
		t.Fatalf("the proxy got %s, want the proxy/initialize of client %s", m.Bytes(), name)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(m.Params) + `}}`)
	if answer != nil {
		answer()
	}
	p.reply(m, string(p.recvMsg().Result))
}

// initializedFor checks the editor's next message: the answer to its
// initialize under id, made for the client named name.
func initializedFor(t *testing.T, e *editor, id int, name string) {
	t.Helper()
	m := e.recvMsg()
	if string(m.ID) != fmt.Sprint(id) || m.Error != nil || !strings.Contains(string(m.Result), `"name":"for-`+name+`"`) {
		t.Fatalf("got %s, want initialize %d answered for client %s", e.seen[len(e.seen)-1], id, name)
	}
}

// openSession opens a session through the scripted proxy p and agent a,
// under id 2: the chain works.
func openSession(t *testing.T, e *editor, p, a *scripted) {
	t.Helper()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	m := p.recvMsg()
	if m.Method != "session/new" {
		t.Fatalf("the proxy got %s, want session/new", m.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":` + string(m.Params) + `}}`)
	a.reply(a.recvMsg(), `{"sessionId":"s1"}`)
	p.reply(m, string(p.recvMsg().Result))
	if m := e.recvMsg(); string(m.ID) != "2" || m.Error != nil || !strings.Contains(string(m.Result), `"sessionId":"s1"`) {
		t.Fatalf("got %s, want session/new answered", e.seen[len(e.seen)-1])
	}
}

// restartableChain starts a chain of one scripted proxy, restarted when
// it fails, and a scripted agent, with cfg's timings. It returns the
// editor, the proxy and the agent as they first started, and proxyStarted
// for the proxy's next start.
func restartableChain(t *testing.T, cfg Config) (e *editor, p, a *scripted, proxyStarted func() *scripted) {
	t.Helper()
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
	proxy.OnFailure = PolicyRestart
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	cfg.Proxies, cfg.Agent = []Component{proxy}, agent
	e = startChain(t, cfg)
	return e, proxyStarted(), agentStarted(), proxyStarted
}

// initializeA has the editor initialize for client a, under id 0,
// through the proxy p, which the agent a answers.
func initializeA(t *testing.T, e *editor, p, a *scripted) {
	t.Helper()
	e.send(clientInit(0, "a"))
	forwardInit(t, p, "a", func() { answerInit(t, a, "a") })
	initializedFor(t, e, 0, "a")
}

// restoreWithA has the restarted proxy p take the replay of client a's
// initialize, answered by the agent, or from the conductor's record when
// the agent answered it before (answered): it is not asked again.
func restoreWithA(t *testing.T, p, a *scripted, answered bool) {
	t.Helper()
	if answered {
		forwardInit(t, p, "a", nil)
		return
	}
	forwardInit(t, p, "a", func() { answerInit(t, a, "a") })
}

// restartHoldingB has the editor initialize for client a and then for
// client b, whose params differ, and the proxy p die holding b's: after
// a's was answered (answered), or with both pending. It returns the
// restarted proxy once the replay of a's initialize has restored it, and
// a's initialize is answered.
func restartHoldingB(t *testing.T, e *editor, p, a *scripted, proxyStarted func() *scripted, answered bool) *scripted {
	t.Helper()
	if answered {
		initializeA(t, e, p, a)
		e.send(clientInit(1, "b"))
		if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
			t.Fatalf("the proxy got %s, want its second proxy/initialize", m.Bytes())
		}
		p.w.Close() // the proxy dies holding it
	} else {
		e.send(clientInit(0, "a"))
		p.recvMsg()
		e.send(clientInit(1, "b"))
		p.recvMsg()
		p.w.Close() // the proxy dies holding both
	}
	p = proxyStarted()
	restoreWithA(t, p, a, answered)
	if !answered {
		initializedFor(t, e, 0, "a")
	}
	return p
}

// pendInitialize leaves an initialize of the editor's pending on the
// proxy p: client a's, under id 0, or for a later replay client b's,
// under id 1, once a's is answered. It returns that initialize's id.
func pendInitialize(t *testing.T, e *editor, p, a *scripted, later bool) int {
	t.Helper()
	if !later {
		e.send(clientInit(0, "a"))
		return 0
	}
	initializeA(t, e, p, a)
	e.send(clientInit(1, "b"))
	return 1
}

// releaseAndOpen lets the held restart go on, has the new proxy restored
// with client a's initialize, which the agent answered before for a later
// replay, and opens a session through it. The session's answer is the
// editor's next message: the initialize a cancel answered is not answered
// again, and b is not replayed.
func releaseAndOpen(t *testing.T, e *editor, h *heldBackoff, proxyStarted func() *scripted, a *scripted, later bool) {
	t.Helper()
	close(h.release)
	p := proxyStarted()
	restoreWithA(t, p, a, later)
	openSession(t, e, p, a)
}

// TestInitializeReplayedWithItsParams has a restarted proxy die holding
// the editor's second initialize, whose params differ from the first's:
// after the first one answered, or with both pending. The new process is
// initialized as the old one first was, its initialize of the agent
// answered from the record when the agent had answered it; then it is sent
// each initialize pending with other params, in turn, which reaches the
// agent, and each initialize is answered for its own params.
func TestInitializeReplayedWithItsParams(t *testing.T) {
	for _, shape := range []string{"after an answered one", "both pending"} {
		t.Run(shape, func(t *testing.T) {
			e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})

			p = restartHoldingB(t, e, p, a, proxyStarted, shape == "after an answered one")
			forwardInit(t, p, "b", func() { answerInit(t, a, "b") })
			initializedFor(t, e, 1, "b")
			openSession(t, e, p, a)
		})
	}
}

// TestInitializeAnsweredFromItsRecord has the editor initialize a
// proxy twice with other params, and the agent answer both, before the
// proxy dies: having answered both, or holding the second. The restarted
// proxy's initialize of the agent for each replay is answered from the
// agent's answer to the same params, not from its latest answer, and the
// agent is not asked again.
func TestInitializeAnsweredFromItsRecord(t *testing.T) {
	for _, shape := range []string{"both answered", "the second held"} {
		t.Run(shape, func(t *testing.T) {
			e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})

			initializeA(t, e, p, a)
			e.send(clientInit(1, "b"))
			if shape == "both answered" {
				forwardInit(t, p, "b", func() { answerInit(t, a, "b") })
				initializedFor(t, e, 1, "b")
			} else {
				m := p.recvMsg()
				p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(m.Params) + `}}`)
				answerInit(t, a, "b")
				p.recvMsg() // the agent's answer, which the proxy dies holding
			}
			p.w.Close()
			p = proxyStarted()
			recorded := func(name string) {
				t.Helper()
				m := p.recvMsg()
				if m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"`+name+`"`) {
					t.Fatalf("the restarted proxy got %s, want the proxy/initialize of client %s", m.Bytes(), name)
				}
				p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(m.Params) + `}}`)
				got := p.recvMsg()
				if !strings.Contains(string(got.Result), `"name":"for-`+name+`"`) {
					t.Fatalf("the restarted proxy's initialize for client %s was answered %s; want the agent's answer to it", name, got.Bytes())
				}
				p.reply(m, string(got.Result))
			}
			recorded("a")
			if shape == "the second held" {
				recorded("b")
				initializedFor(t, e, 1, "b")
			}
			openSession(t, e, p, a) // the agent's next request is this one
		})
	}
}

// TestInitializeCancelledDuringRestart has the editor cancel its
// initialize while the proxy that died holding it waits to be restarted:
// the cancel answers it at once, -32800, and it is not answered again.
// The restarted proxy is initialized all the same, and the chain works.
// The cancelled initialize waited for the replay that restores the proxy
// (the first), which goes on; or for a replay of its own params, which is
// not sent.
func TestInitializeCancelledDuringRestart(t *testing.T) {
	for _, shape := range []string{"the first replay", "a later replay"} {
		t.Run(shape, func(t *testing.T) {
			var cfg Config
			h := holdBackoff(&cfg)
			e, p, a, proxyStarted := restartableChain(t, cfg)

			id := pendInitialize(t, e, p, a, shape == "a later replay")
			if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
				t.Fatalf("the proxy got %s, want its proxy/initialize", m.Bytes())
			}
			p.w.Close() // the proxy dies holding it
			h.next(t)   // and waits to be started again
			e.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, id))
			if m := e.recvMsg(); string(m.ID) != fmt.Sprint(id) || m.Error == nil || errorCode(m.Error) != codeCancelled {
				t.Fatalf("got %s, want initialize %d answered -32800 at once", e.seen[len(e.seen)-1], id)
			}

			releaseAndOpen(t, e, h, proxyStarted, a, shape == "a later replay")
		})
	}
}

// TestInitializeLaterReplayTimeout has a restarted proxy answer the
// replay that restores it, then never answer the replay of the editor's
// second initialize, whose params differ: after the first one answered,
// or with both pending, when the chain's own timer stops as the first is
// answered. The second initialize is answered once init_timeout has
// passed, with an error naming the proxy and saying why; the proxy is
// restarted again, and restored, but not sent those params again, and
// the chain works.
func TestInitializeLaterReplayTimeout(t *testing.T) {
	for _, shape := range []string{"after an answered one", "both pending"} {
		t.Run(shape, func(t *testing.T) {
			// Ample for the replay that restores the proxy, on a loaded
			// machine under -race; the later replay waits it out in full.
			e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond, InitTimeout: 3 * time.Second})

			p = restartHoldingB(t, e, p, a, proxyStarted, shape == "after an answered one")
			if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"b"`) {
				t.Fatalf("the restarted proxy got %s, want the replay of b's proxy/initialize", m.Bytes())
			}
			// The proxy never answers it.
			m := e.recvMsg()
			want := `component \"proxy\" did not answer the replayed initialize within 3s`
			if string(m.ID) != "1" || !strings.Contains(string(m.Error), want) {
				t.Fatalf("got %s, want initialize 1 answered with an error saying %s", e.seen[len(e.seen)-1], want)
			}
			p = proxyStarted()
			forwardInit(t, p, "a", nil)
			// The session's answer is the editor's next message, and the
			// proxy's: b is not replayed again.
			openSession(t, e, p, a)
		})
	}
}

// TestInitializeReplaysAccepted has a restarted proxy's first
// initialize be one it did not take: refused by the proxy, or with
// params its dialect cannot carry (not an object, to a proxy that
// refused proxy/initialize and _proxy/initialize, whose initialize must
// carry _meta.proxy), answered with the refusal. The editor's next
// initialize is taken; when the proxy dies, the new process is
// initialized with the params it took, not the first ones, and the chain
// works.
func TestInitializeReplaysAccepted(t *testing.T) {
	const good = `{"protocolVersion":1,"clientInfo":{"name":"good"}}`
	for _, shape := range []string{"refused", "not carried"} {
		t.Run(shape, func(t *testing.T) {
			e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})
			refuse := func(m *wire.Message, code int) {
				p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"no"}}`, m.ID, code))
			}
			// answer has the proxy take its initialize m, as a proxy of its
			// dialect: pass it on, and answer with its successor's answer.
			answer := func(m *wire.Message, fromAgent func()) {
				p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + good + `}}`)
				if fromAgent != nil {
					fromAgent()
				}
				result := p.recvMsg().Result
				if shape == "not carried" {
					result, _ = wire.Thinkwell.InitializeParams(result) // marked, as its dialect wants
				}
				p.reply(m, string(result))
			}
			want := wire.MethodProxyInitialize
			if shape == "refused" {
				e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"bad"}}`)
				refuse(p.recvMsg(), -32602)
			} else {
				e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":[1]}`)
				refuse(p.recvMsg(), -32601) // proxy/initialize
				refuse(p.recvMsg(), -32601) // _proxy/initialize
				want = wire.MethodInitialize
			}
			if m := e.recvMsg(); string(m.ID) != "0" || m.Error == nil {
				t.Fatalf("got %s, want initialize 0 refused", e.seen[len(e.seen)-1])
			}
			e.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + good + `}`)
			answer(p.recvMsg(), func() { a.reply(a.recvMsg(), `{"protocolVersion":1}`) })
			if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil {
				t.Fatalf("got %s, want initialize 1 answered", e.seen[len(e.seen)-1])
			}

			p.w.Close() // the proxy dies
			p = proxyStarted()
			m := p.recvMsg()
			if m.Method != want || !strings.Contains(string(m.Params), `"name":"good"`) {
				t.Fatalf("the restarted proxy got %s, want %s with the params it took", m.Bytes(), want)
			}
			answer(m, nil) // the agent, which answered, is not asked again
			openSession(t, e, p, a)
		})
	}
}

// TestInitializeCancelledBeforeRestart has the editor cancel its
// initialize while the proxy holds it: the proxy gets the cancel, and
// dies without answering. The restart answers the initialize at once,
// -32800, as a cancel of one waiting for a replay would be, and it is not
// answered again nor, with params of its own, replayed; the proxy is
// restored, and the chain works.
func TestInitializeCancelledBeforeRestart(t *testing.T) {
	for _, shape := range []string{"the first replay", "a later replay"} {
		t.Run(shape, func(t *testing.T) {
			var cfg Config
			h := holdBackoff(&cfg)
			e, p, a, proxyStarted := restartableChain(t, cfg)

			id := pendInitialize(t, e, p, a, shape == "a later replay")
			held := p.recvMsg()
			if held.Method != wire.MethodProxyInitialize {
				t.Fatalf("the proxy got %s, want its proxy/initialize", held.Bytes())
			}
			e.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, id))
			if m := p.recvMsg(); m.Method != wire.MethodCancelRequest || string(wire.Member(m.Params, "requestId")) != string(held.ID) {
				t.Fatalf("the proxy got %s, want the cancel of its proxy/initialize %s", m.Bytes(), held.ID)
			}
			p.w.Close() // the proxy dies without answering
			h.next(t)   // and waits to be started again
			if m := e.recvMsg(); string(m.ID) != fmt.Sprint(id) || m.Error == nil || errorCode(m.Error) != codeCancelled {
				t.Fatalf("got %s, want initialize %d answered -32800", e.seen[len(e.seen)-1], id)
			}

			releaseAndOpen(t, e, h, proxyStarted, a, shape == "a later replay")
		})
	}
}

// A heldBypass holds a bypassed proxy's initializes after its calls are
// taken, before they are sent on, until release is closed.
// A test that fails before it releases them releases them as it ends, so
// that the chain can stop.
type heldBypass struct {
	reached, release chan struct{}
	free             func()
}

func holdBypass(t *testing.T, cfg *Config) *heldBypass {
	h := &heldBypass{reached: make(chan struct{}, 1), release: make(chan struct{})}
	h.free = sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(h.free)
	cfg.bypassHold = func() {
		h.reached <- struct{}{}
		<-h.release
	}
	return h
}

// TestInitializeCancelledDuringBypass has the editor cancel its
// initialize as the proxy holding it dies and is bypassed: while the proxy
// holds it, the cancel going to the proxy, or once the proxy is gone,
// before the initialize is sent on to the agent. Either way it is answered
// -32800 at once, as under restart, and not sent on: the agent's first
// message is the editor's next initialize.
func TestInitializeCancelledDuringBypass(t *testing.T) {
	for _, shape := range []string{"held by the proxy", "before it is sent on"} {
		t.Run(shape, func(t *testing.T) {
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			proxy.OnFailure = PolicyBypass
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			cfg := Config{Proxies: []Component{proxy}, Agent: agent}
			h := holdBypass(t, &cfg)
			e := startChain(t, cfg)
			p, a := proxyStarted(), agentStarted()

			e.send(clientInit(0, "a"))
			held := p.recvMsg()
			if held.Method != wire.MethodProxyInitialize {
				t.Fatalf("the proxy got %s, want its proxy/initialize", held.Bytes())
			}
			cancel := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}`
			if shape == "held by the proxy" {
				e.send(cancel)
				if m := p.recvMsg(); m.Method != wire.MethodCancelRequest || string(wire.Member(m.Params, "requestId")) != string(held.ID) {
					t.Fatalf("the proxy got %s, want the cancel of its proxy/initialize %s", m.Bytes(), held.ID)
				}
			}
			p.w.Close() // the proxy dies without answering
			<-h.reached // bypassed, its initialize not yet sent on
			if shape == "before it is sent on" {
				e.send(cancel)
			}
			if m := e.recvMsg(); string(m.ID) != "0" || m.Error == nil || errorCode(m.Error) != codeCancelled {
				t.Fatalf("got %s, want initialize 0 answered -32800", e.seen[len(e.seen)-1])
			}
			h.free()

			e.send(clientInit(1, "b"))
			answerInit(t, a, "b") // the agent never got a's
			initializedFor(t, e, 1, "b")
		})
	}
}

// TestInitializeNotBypassedWhileStopping has a bypass proxy fail as the
// chain's components are being stopped: it is not bypassed, and the
// initialize pending on it fails with its error and why the policy did
// not apply. The editor cannot see that error: its own requests are
// answered before the components begin to stop. So the initialize is
// the middle proxy's own, whose input stays open while the first proxy,
// ahead of it, has not yet ended.
//
// The failure is the initialize timer's (the proxy never answers), held
// until the components are being stopped, which the first proxy's input
// ending shows; only a hook can order it so.
func TestInitializeNotBypassedWhileStopping(t *testing.T) {
	dir := t.TempDir()
	first, firstStarted := scriptedComponent(t, dir, "first")
	second, secondStarted := scriptedComponent(t, dir, "second")
	mute, muteStarted := scriptedComponent(t, dir, "mute")
	mute.OnFailure = PolicyBypass
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	reached, release := make(chan string, 1), make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // a test that fails before it releases the failure lets the chain stop
	e := startChain(t, Config{
		Proxies: []Component{first, second, mute}, Agent: agent,
		InitTimeout: time.Millisecond, // the failure is held until released, whenever it comes
		GracePeriod: time.Minute,      // the first proxy ends when the test says, not at a deadline
		running: func(c *chain) {
			failed := c.failed
			c.failed = func(p *peer, cause error) {
				reached <- p.name
				<-release
				failed(p, cause)
			}
		},
	})
	f, s, p, a := firstStarted(), secondStarted(), muteStarted(), agentStarted()

	s.send(`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("mute got %s, want its proxy/initialize", m.Bytes())
	}
	e.send(initLine) // starts the initialize timer, which fails mute: the deepest still initializing
	init := f.recvMsg()
	select {
	case name := <-reached:
		if name != "mute" {
			t.Fatalf("%s failed, want mute", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the initialize timer never failed mute")
	}
	f.reply(init, `{"protocolVersion":1}`) // the editor has nothing in flight: the drain is over at once
	if m := e.recvMsg(); string(m.ID) != "0" || m.Error != nil {
		t.Fatalf("got %s, want initialize 0 answered", e.seen[len(e.seen)-1])
	}
	e.in.Close() // the editor's input ends: the chain stops
	inputEnded(t, f)
	free()

	m := s.recvMsg()
	msg := errorMessage(m.Error)
	if string(m.ID) != "7" || errorCode(m.Error) != codeInternalError ||
		!strings.Contains(msg, `component "mute" did not answer initialize within 1ms`) ||
		!strings.HasSuffix(msg, "; not bypassed: the conductor is shutting down") {
		t.Fatalf("second's initialize answered %s, want -32603 saying mute did not answer and was not bypassed", m.Bytes())
	}
	f.w.Close()
	s.w.Close()
	p.w.Close()
	inputEnded(t, a) // and nothing came before: the initialize was not sent on
	a.w.Close()
	if err := e.close(); err == nil || !strings.Contains(err.Error(), `"mute"`) {
		t.Errorf("Run = %v, want mute's failure", err)
	}
}

// TestInitializeRefusedRestoreSendsNoMore has the proxy die holding
// client b's initialize, after a's was answered, and its new process
// refuse the replay of a's that is to restore it. That process is sent
// nothing more, b's replay least of all (it is failing, and would take
// b's params as its first initialize); b's initialize fails with the
// refusal.
func TestInitializeRefusedRestoreSendsNoMore(t *testing.T) {
	e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond, RestartLimit: 1})
	initializeA(t, e, p, a)
	e.send(clientInit(1, "b"))
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("the proxy got %s, want its second proxy/initialize", m.Bytes())
	}
	p.w.Close() // the proxy dies holding it
	p = proxyStarted()
	m := p.recvMsg()
	if m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"a"`) {
		t.Fatalf("the restarted proxy got %s, want the replay of a's proxy/initialize", m.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32603,"message":"no"}}`)
	if m := e.recvMsg(); string(m.ID) != "1" || !strings.Contains(string(m.Error), "refused the replayed initialize") {
		t.Fatalf("got %s, want initialize 1 failed with the refusal", e.seen[len(e.seen)-1])
	}
	// The chain stops (the restart limit is spent): what the refusing
	// process got until its input ended is all it ever gets.
	e.close()
	for l := range p.lines {
		t.Errorf("the process that refused its restoring replay got %s", l)
	}
}
