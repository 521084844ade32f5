package conductor

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRefusedNotificationsLoggedSparingly: a peer that keeps sending
// notifications the conductor refuses has them dropped, the first few
// logged with their method and why, the rest counted, not one warning
// each; and the chain goes on working.
func TestRefusedNotificationsLoggedSparingly(t *testing.T) {
	for _, tt := range []struct{ name, from, line string }{
		// The agent has no successor to send an envelope to.
		{"agent", "agent", `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{}}}`},
		// An envelope must carry a method.
		{"client", "client", `{"jsonrpc":"2.0","method":"proxy/successor","params":{}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			core, logs := observer.New(zap.DebugLevel)
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			e := startChain(t, Config{Agent: agent, Logger: zap.New(core)})
			a := agentStarted()
			const refused = 10000
			for range refused {
				if tt.from == "agent" {
					a.send(tt.line)
				} else {
					e.send(tt.line)
				}
			}
			e.send(clientInit(0, "a"))
			answerInit(t, a, "a") // read after all of them, on the same pipe
			initializedFor(t, e, 0, "a")
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
			var warned int
			counted := false
			for _, en := range logs.All() {
				if ctx := en.ContextMap(); strings.Contains(en.Message, "dropped notification") && ctx["peer"] == tt.from {
					warned++
					counted = counted || ctx["count"] == int64(refused)
				}
			}
			if few := refusedLogged + 1; warned > few {
				t.Errorf("logged %d warnings for %d refused notifications, want at most %d", warned, refused, few)
			}
			if !counted {
				t.Errorf("no warning counts the %d refused notifications", refused)
			}
		})
	}
}

// TestUnawaitedAnswersLoggedSparingly: a component that answers a call
// again and again has the answers nobody awaits dropped, the first few
// logged with their id, the rest counted, not one line each; and the
// chain goes on working.
func TestUnawaitedAnswersLoggedSparingly(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.DebugLevel)
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	e := startChain(t, Config{Agent: agent, Logger: zap.New(core)})
	a := agentStarted()
	e.send(clientInit(0, "a"))
	m := a.recvMsg()
	const again = 10000
	for range again + 1 { // the first is awaited
		a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-a"}}`)
	}
	initializedFor(t, e, 0, "a")
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	a.reply(a.recvMsg(), `{"sessionId":"s1"}`) // read after all of them, on the same pipe
	if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("session/new answered %s", m.Bytes())
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	var logged int
	counted := false
	for _, en := range logs.All() {
		if ctx := en.ContextMap(); strings.Contains(en.Message, "nobody awaits") && ctx["peer"] == "agent" {
			logged++
			counted = counted || ctx["count"] == int64(again)
		}
	}
	if few := unawaitedLogged + 1; logged > few {
		t.Errorf("logged %d lines for %d answers nobody awaits, want at most %d", logged, again, few)
	}
	if !counted {
		t.Errorf("no line counts the %d answers nobody awaits", again)
	}
}
