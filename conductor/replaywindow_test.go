package conductor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestInitializeRestoredWithoutPassingOn has a proxy die holding the
// editor's second initialize, with other params than the first, which the
// agent has not seen; restarted, it answers the replay that restores it
// on its own, without passing an initialize on. The replay of the second
// is then passed on as any later one: its params were never answered, so
// it reaches the agent, and the editor gets the agent's answer to it,
// not the record of the first's, which stood only for the restoring
// replay's initialize.
func TestInitializeRestoredWithoutPassingOn(t *testing.T) {
	e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})
	initializeA(t, e, p, a)
	p, replay := diesHoldingB(t, e, p, proxyStarted)
	p.reply(replay, `{"protocolVersion":1,"agentInfo":{"name":"the-proxy"}}`)
	m := p.recvMsg()
	if m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"b"`) {
		t.Fatalf("the restarted proxy got %s, want the replay of client b's initialize", m.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(m.Params) + `}}`)
	// Whichever comes first: the agent asked, or the proxy answered.
	select {
	case l := <-a.lines:
		if m, err := wire.Parse(l); err != nil || m.Method != wire.MethodInitialize || !strings.Contains(string(m.Params), `"name":"b"`) {
			t.Fatalf("the agent got %s, want client b's initialize", l)
		} else {
			a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-b"}}`)
		}
	case l := <-p.lines:
		t.Fatalf("the proxy's initialize for client b was answered before the agent was asked: %s", l)
	case <-time.After(20 * time.Second):
		t.Fatal("neither the agent nor the proxy got anything")
	}
	p.reply(m, string(p.recvMsg().Result))
	initializedFor(t, e, 1, "b")
	openSession(t, e, p, a)
}

// TestInitializeDuringReplay has the editor initialize again while the
// replay that restores a restarted proxy is in flight: with the params
// the replay carries, or with others. It waits behind the replay, whose
// initialize of the agent is answered from the record alone; then it
// goes on as any initialize, to the agent, which answers it afresh, and
// the editor gets that answer once.
func TestInitializeDuringReplay(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run("client "+name, func(t *testing.T) {
			e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})
			initializeA(t, e, p, a)
			p.w.Close()
			p = proxyStarted()
			replay := p.recvMsg()
			e.send(clientInit(1, name)) // while the replay is in flight
			p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(replay.Params) + `}}`)
			recorded := p.recvMsg()
			if !strings.Contains(string(recorded.Result), `"for-a"`) {
				t.Fatalf("the replay's initialize was answered %s, want the record of a's", recorded.Bytes())
			}
			p.reply(replay, string(recorded.Result))
			forwardInit(t, p, name, func() {
				m := a.recvMsg()
				if m.Method != wire.MethodInitialize || !strings.Contains(string(m.Params), `"name":"`+name+`"`) {
					t.Fatalf("the agent got %s, want client %s's initialize", m.Bytes(), name)
				}
				a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-`+name+`"},"again":true}`)
			})
			if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil || !strings.Contains(string(m.Result), `"again":true`) {
				t.Fatalf("got %s, want initialize 1 answered afresh by the agent", e.seen[len(e.seen)-1])
			}
			openSession(t, e, p, a) // nothing else came first: it was answered once
		})
	}
}

// TestHeldWaitForEveryReplay has a proxy die holding the editor's second
// initialize (client b's), and the editor initialize again with the
// first's params (client a's) and open a session while the replay that
// restores the new process is in flight. What the editor sent waits
// until every replay is answered: the new process gets a's replay, then
// b's, and only then the editor's initialize and session/new, in the
// order sent. The editor's initialize then goes on as any initialize, to
// the agent, as it does with only one replay (TestInitializeDuringReplay),
// rather than take the record of a's answer meant for the replay.
func TestHeldWaitForEveryReplay(t *testing.T) {
	e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond})
	initializeA(t, e, p, a)
	p, replay := diesHoldingB(t, e, p, proxyStarted)
	e.send(clientInit(2, "a"))
	e.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	e.sync() // both wait behind the replays now
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(replay.Params) + `}}`)
	p.reply(replay, string(p.recvMsg().Result))
	forwardInit(t, p, "b", func() { answerInit(t, a, "b") })
	initializedFor(t, e, 1, "b")
	// Then what the editor sent, in order.
	init := p.recvMsg()
	if init.Method != wire.MethodProxyInitialize || !strings.Contains(string(init.Params), `"name":"a"`) {
		t.Fatalf("the proxy got %s, want client a's proxy/initialize", init.Bytes())
	}
	sess := p.recvMsg()
	if sess.Method != "session/new" {
		t.Fatalf("the proxy got %s, want session/new", sess.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(init.Params) + `}}`)
	select {
	case l := <-a.lines:
		if m, err := wire.Parse(l); err != nil || m.Method != wire.MethodInitialize || !strings.Contains(string(m.Params), `"name":"a"`) {
			t.Fatalf("the agent got %s, want client a's initialize again", l)
		} else {
			a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-a"},"again":true}`)
		}
	case l := <-p.lines:
		t.Fatalf("the editor's initialize was answered from the record, the agent not asked: %s", l)
	case <-time.After(20 * time.Second):
		t.Fatal("neither the agent nor the proxy got anything")
	}
	p.reply(init, string(p.recvMsg().Result))
	if m := e.recvMsg(); string(m.ID) != "2" || m.Error != nil || !strings.Contains(string(m.Result), `"again":true`) {
		t.Fatalf("got %s, want initialize 2 answered afresh by the agent", e.seen[len(e.seen)-1])
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/new","params":` + string(sess.Params) + `}}`)
	a.reply(a.recvMsg(), `{"sessionId":"s1"}`)
	p.reply(sess, string(p.recvMsg().Result))
	if m := e.recvMsg(); string(m.ID) != "3" || m.Error != nil || !strings.Contains(string(m.Result), `"sessionId":"s1"`) {
		t.Fatalf("got %s, want session/new answered", e.seen[len(e.seen)-1])
	}
}

// diesHoldingB has the editor send client b's initialize, which the proxy
// dies holding, and returns the restarted proxy and the replay of client
// a's initialize that restores it.
func diesHoldingB(t *testing.T, e *editor, p *scripted, proxyStarted func() *scripted) (*scripted, *wire.Message) {
	t.Helper()
	e.send(clientInit(1, "b"))
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("the proxy got %s, want its second proxy/initialize", m.Bytes())
	}
	p.w.Close() // the proxy dies holding it
	p = proxyStarted()
	replay := p.recvMsg()
	if !strings.Contains(string(replay.Params), `"name":"a"`) {
		t.Fatalf("the restarted proxy got %s, want the replay of client a's initialize", replay.Bytes())
	}
	return p, replay
}

// TestRefusedRestoreSendsNoMoreReplays has a restarted proxy refuse the
// replay that restores it while the replay of client b's initialize waits
// behind it. The process is failed for that refusal: b's replay must not
// go to it, whose answer, coming before the failure takes the replays,
// would open the gate and let what the editor queued reach a proxy never
// restored.
func TestRefusedRestoreSendsNoMoreReplays(t *testing.T) {
	e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond, RestartLimit: 1})
	initializeA(t, e, p, a)
	p, replay := diesHoldingB(t, e, p, proxyStarted)
	p.send(`{"jsonrpc":"2.0","id":` + string(replay.ID) + `,"error":{"code":-32603,"message":"not today"}}`)
	select {
	case l, ok := <-p.lines:
		if ok {
			t.Errorf("the proxy that refused its restore was sent %s", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy that refused its restore was neither sent anything nor stopped")
	}
	for { // nor is b's initialize left waiting
		if m := e.recvMsg(); m.IsResponse() && string(m.ID) == "1" {
			break
		}
	}
	e.close()
}

// TestGatedProxySuccessorReads has the editor flood a restarted proxy
// while a replay of its is still passed on to the agent: what the editor
// sent waits behind the gate, past the outbox's bound, and the editor's
// reader pauses. The agent streams an update, then answers the replay's
// initialize: its reader must go on to that answer, which alone opens
// the gate, rather than wait for the gated outbox to drain, which would
// hold everything until the initialize timeout failed the proxy.
func TestGatedProxySuccessorReads(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	paused := make(chan struct{}, 1)
	logger := zap.New(core, zap.Hooks(func(en zapcore.Entry) error {
		if en.Message == pausedReading {
			select {
			case paused <- struct{}{}:
			default:
			}
		}
		return nil
	}))
	e, p, a, proxyStarted := restartableChain(t, Config{RestartBackoff: time.Millisecond, InitTimeout: time.Minute, Logger: logger})
	initializeA(t, e, p, a)
	p, replay := diesHoldingB(t, e, p, proxyStarted)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + string(replay.Params) + `}}`)
	p.reply(replay, string(p.recvMsg().Result)) // restored from the record
	forwardB(t, p)
	init := a.recvMsg()
	fill := strings.Repeat("x", 1<<20)
	go func() {
		for id := 2; id < 8; id++ {
			if e.ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"fill":%q}}}`, id, fill)) != nil {
				return
			}
		}
	}()
	select {
	case <-paused:
	case <-time.After(20 * time.Second):
		t.Fatal("the editor's reader never paused")
	}
	a.send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}`)
	// The answer comes once the update was read, not in one read with it:
	// once the agent's reader has paused, or, as it should, not within 1s.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if logs.FilterMessage(pausedReading).FilterField(zap.String("peer", "agent")).Len() > 0 {
			break
		}
	}
	a.reply(init, `{"protocolVersion":1,"agentInfo":{"name":"for-b"}}`)
	select {
	case l, ok := <-p.lines:
		if !ok || !strings.Contains(string(l), `"for-b"`) {
			t.Fatalf("the proxy got %s, want the agent's answer for client b", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's answer to the replayed initialize never reached the proxy")
	}
}

// forwardB has the restarted proxy p pass on the replay of client b's
// initialize.
func forwardB(t *testing.T, p *scripted) {
	t.Helper()
	m := p.recvMsg()
	if m.Method != wire.MethodProxyInitialize || !strings.Contains(string(m.Params), `"name":"b"`) {
		t.Fatalf("the restarted proxy got %s, want the replay of client b's initialize", m.Bytes())
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"initialize","params":` + string(m.Params) + `}}`)
}

// pausedReading is what a reader logs as it waits for a full outbox.
const pausedReading = "paused reading: a peer's queue is full"
