package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// promptLine is a prompt to the streamer agent; crash makes a crashing
// proxy die when it sees it.
func promptLine(id int, crash bool) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[],"_meta":{"tag":"t%d","updates":3,"crash":%v}}}`, id, id, crash)
}

// burst sends prompts 100..100+n-1, the one at crashAt crashing the proxy,
// and returns every response by id; it fails if any is missing.
func burst(t *testing.T, e *editor, n, crashAt int) map[string]*wire.Message {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			e.ch.Send([]byte(promptLine(100+i, i == crashAt)))
		}
	}()
	got := map[string]*wire.Message{}
	for len(got) < n {
		m := e.recvMsg()
		if m.IsResponse() {
			got[string(m.ID)] = m
		}
	}
	wg.Wait()
	return got
}

func TestFailurePolicies(t *testing.T) {
	for _, policy := range []Policy{PolicyFail, PolicyRestart, PolicyBypass} {
		t.Run(string(policy), func(t *testing.T) {
			dir := t.TempDir()
			crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")
			crasher.OnFailure = policy
			core, logs := observer.New(zap.InfoLevel)
			e := startChain(t, Config{
				Proxies:     []Component{fake(t, dir, "first", "proxy"), crasher, fake(t, dir, "last", "proxy")},
				Agent:       fake(t, dir, "agent", "streamer"),
				GracePeriod: 500 * time.Millisecond,
				Logger:      zap.New(core),
			})
			e.send(initLine)
			e.recvMsg()
			got := burst(t, e, 20, 10)
			crashed := got["110"]
			if crashed.Error == nil || !strings.Contains(string(crashed.Error), "crasher") {
				t.Errorf("the crashing prompt's answer does not name the proxy: %s %s", crashed.Result, crashed.Error)
			}
			named := logs.FilterMessage("component failed").FilterField(zap.String("component", "crasher"))
			if named.Len() == 0 {
				t.Errorf("no log entry names the failed component; logged: %v", logs.All())
			}

			if policy == PolicyFail {
				err := e.close()
				if err == nil || !strings.Contains(err.Error(), `"crasher"`) || !strings.Contains(err.Error(), "exit status 9") {
					t.Errorf("Run = %v, want an error naming crasher and its exit status", err)
				}
				return
			}
			// The chain goes on: every prompt of a second burst succeeds.
			for id, m := range burst(t, e, 10, -1) {
				if m.Error != nil {
					t.Errorf("after %s, prompt %s failed: %s", policy, id, m.Error)
				}
			}
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
			crasherSaw, _ := os.ReadFile(filepath.Join(dir, "crasher.txt"))
			agentSaw, _ := os.ReadFile(filepath.Join(dir, "agent.txt"))
			lastSaw, _ := os.ReadFile(filepath.Join(dir, "last.txt"))
			switch policy {
			case PolicyRestart:
				// Initialized twice, the second time answered from the record:
				// neither the last proxy nor the agent is initialized again.
				if n := strings.Count(string(crasherSaw), `"method":"proxy/initialize"`); n != 2 {
					t.Errorf("restarted proxy saw %d proxy/initialize, want 2", n)
				}
				if n := strings.Count(string(lastSaw), `"method":"proxy/initialize"`); n != 1 {
					t.Errorf("last proxy saw %d proxy/initialize, want 1", n)
				}
				if n := strings.Count(string(agentSaw), `"method":"initialize"`); n != 1 {
					t.Errorf("agent saw %d initialize, want 1", n)
				}
			case PolicyBypass:
				if n := strings.Count(string(crasherSaw), `"method":"session/prompt"`); n > 11 {
					t.Errorf("bypassed proxy still got prompts: %d", n)
				}
			}
			if n := strings.Count(string(lastSaw), `"method":"session/prompt"`); n < 10 {
				t.Errorf("last proxy saw only %d prompts", n)
			}
		})
	}
}

// TestRestartLimit checks that a proxy that keeps crashing is restarted only
// RestartLimit times before the chain gives up, and that the request whose
// crash ends it is told why.
func TestRestartLimit(t *testing.T) {
	dir := t.TempDir()
	crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")
	crasher.OnFailure = PolicyRestart
	e := startChain(t, Config{
		Proxies:      []Component{crasher},
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 2,
	})
	e.send(initLine)
	e.recvMsg()
	for i := range 3 {
		e.send(promptLine(i, true))
		m := e.recvMsg()
		if m.Error == nil {
			t.Fatalf("crashing prompt %d succeeded", i)
		}
		// The last crash stops the chain: its caller is told why, as an
		// initialize's would be; the others' proxy was restarted.
		if said := strings.Contains(string(m.Error), "not restarted: restarted 2 times within"); said != (i == 2) {
			t.Errorf("prompt %d answered %s; saying why the proxy was not restarted: %v, want %v", i, m.Error, said, i == 2)
		}
	}
	err := e.close()
	if err == nil || !strings.Contains(err.Error(), "crasher") {
		t.Errorf("Run = %v, want the chain to fail on the third crash", err)
	}
	saw, _ := os.ReadFile(filepath.Join(dir, "crasher.txt"))
	if n := strings.Count(string(saw), `"method":"proxy/initialize"`); n != 3 {
		t.Errorf("crasher was initialized %d times, want 3 (first start and 2 restarts)", n)
	}
}

// TestInitTimeout checks that a component that never answers initialize
// fails the editor's initialize with an error that names it, not the proxy
// in front of it.
func TestInitTimeout(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies:     []Component{fake(t, dir, "p", "proxy")},
		Agent:       fake(t, dir, "mute-agent", "mute"),
		InitTimeout: 2 * time.Second, // ample for the proxy to pass it on, even on a loaded machine
	})
	e.send(initLine)
	m := e.recvMsg()
	if m.Error == nil || !strings.Contains(string(m.Error), "mute-agent") || !strings.Contains(string(m.Error), "did not answer initialize") {
		t.Errorf("initialize answer %s %s", m.Result, m.Error)
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), "mute-agent") {
		t.Errorf("Run = %v", err)
	}
}

// TestStartFailure checks that a component that cannot start (here: not
// executable) fails the editor's initialize with an error naming it, and
// Run with an error too.
func TestStartFailure(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   Component{Name: "locked-agent", Command: notExec},
	})
	e.send(initLine)
	m := e.recvMsg()
	if m.Error == nil || !strings.Contains(string(m.Error), `component \"locked-agent\"`) || !strings.Contains(string(m.Error), "permission denied") {
		t.Errorf("initialize answer %s", m.Error)
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), "locked-agent") {
		t.Errorf("Run = %v", err)
	}
}

// TestStartFailureLeavesNothing runs a chain that cannot start with a done
// context and an input Run cannot close: Run returns only once that input
// has ended, with nothing of it left reading. Everything runs in memory
// (the agent fails before any process starts), so synctest can tell when
// Run has nothing left to do but wait for its input.
func TestStartFailureLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		pr, pw := io.Pipe()
		returned := make(chan error, 1)
		go func() {
			returned <- Run(ctx, Config{Agent: Component{Name: "missing", Command: filepath.Join(t.TempDir(), "no-such-agent")}},
				struct{ io.Reader }{pr}, io.Discard)
		}()
		synctest.Wait()
		select {
		case err := <-returned:
			t.Fatalf("Run returned (%v) while its input was still open", err)
		default:
		}
		pw.Close()
		if err := <-returned; err == nil || !strings.Contains(err.Error(), "missing") {
			t.Errorf("Run = %v", err)
		}
		// synctest.Test fails the test if any goroutine Run started is left.
	})
}

// TestStartFailureAnswersLongRequest: a chain that cannot start answers a
// first request longer than max_message_bytes, which a running chain
// answers under its id too, with why it did not start.
func TestStartFailureAnswersLongRequest(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2000) + `"}}` + "\n"
	var out bytes.Buffer
	err := Run(t.Context(), Config{Agent: Component{Name: "missing", Command: filepath.Join(t.TempDir(), "no-such-agent")}, MaxMessageBytes: 1024},
		strings.NewReader(long), &out)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run = %v", err)
	}
	var resp struct {
		ID    json.RawMessage
		Error *struct{ Message string }
	}
	if json.Unmarshal(out.Bytes(), &resp) != nil || string(resp.ID) != "8" || resp.Error == nil || !strings.Contains(resp.Error.Message, "missing") {
		t.Errorf("wrote %q; want an error naming the agent under id 8", out.String())
	}
}

// TestRestartReplayTimeout has a proxy crash mid-prompt and, restarted,
// never answer its replayed initialization. The prompt sent after the
// crash waits behind that replay; it must be answered once init_timeout
// has passed, not never, and the chain ends, its one restart used.
func TestRestartReplayTimeout(t *testing.T) {
	dir := t.TempDir()
	crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1", "ACP_TEST_MUTE_AFTER_FIRST="+filepath.Join(dir, "ran"))
	crasher.OnFailure = PolicyRestart
	// The first initialization must beat init_timeout too, on a loaded
	// machine under -race; the replay waits it out in full either way.
	e := startChain(t, Config{
		Proxies:      []Component{crasher},
		Agent:        fake(t, dir, "agent", "streamer"),
		InitTimeout:  3 * time.Second,
		RestartLimit: 1,
		GracePeriod:  200 * time.Millisecond,
	})
	e.send(initLine)
	e.recvMsg()
	e.send(promptLine(1, true))
	if m := e.recvMsg(); string(m.ID) != "1" || m.Error == nil {
		t.Fatalf("crashing prompt answered %s %s %s", m.ID, m.Result, m.Error)
	}
	e.send(promptLine(2, false))
	for {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if string(m.ID) != "2" || m.Error == nil || !strings.Contains(string(m.Error), "crasher") {
			t.Errorf("prompt after the crash answered %s %s %s, want an error naming crasher", m.ID, m.Result, m.Error)
		}
		break
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), "replayed initialize") {
		t.Errorf("Run = %v, want the replay's timeout", err)
	}
}

// TestRestartSweepsHelpers has a proxy start a helper in a session of its
// own (so outside the process group that is killed when the proxy ends),
// with the proxy's environment, and then crash on a prompt. As the proxy
// is restarted, the crashed start's helper is killed, not left running
// until the chain ends; the new start's helper runs on.
func TestRestartSweepsHelpers(t *testing.T) {
	// A sleep no other process runs, to find the helpers by.
	secs := fmt.Sprintf("%d.%03d", 3000+rand.IntN(1000), rand.IntN(1000))
	dir := t.TempDir()
	crasher := fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")
	crasher.OnFailure = PolicyRestart
	crasher.Args = []string{"-c", `setsid sleep ` + secs + ` </dev/null >/dev/null 2>&1 & exec "$0"`, crasher.Command}
	crasher.Command = "sh"
	e := startChain(t, Config{
		Proxies:      []Component{crasher},
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 2,
		Supervisor:   supervised(t),
	})
	helpers := func(ok func([]int) bool) []int {
		t.Helper()
		for bound := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			pids := running(t, "sleep", secs)
			if ok(pids) {
				return pids
			}
			if time.Now().After(bound) {
				t.Fatalf("helpers running: %v", pids)
			}
		}
	}
	e.send(initLine)
	e.recvMsg()
	first := helpers(func(p []int) bool { return len(p) == 1 })[0]

	e.send(promptLine(0, true))
	if m := e.recvMsg(); m.Error == nil {
		t.Fatal("the crashing prompt succeeded")
	}
	// The restarted proxy's helper appears, and the first is killed.
	helpers(func(p []int) bool { return len(p) == 1 && p[0] != first })
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestRestartOrphansRequests: a proxy forwards a prompt to the agent and
// dies; it is restarted. The new process numbers its requests afresh, so
// its first prompt goes out under the same id as the dead one's. The
// agent is told to cancel the dead process's request, and its late answer
// is dropped: it must not answer the new process's request, and through it
// the editor's later prompt.
func TestRestartOrphansRequests(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
	proxy.OnFailure = PolicyRestart
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, RestartBackoff: time.Millisecond})
	p, a := proxyStarted(), agentStarted()

	// forward has the proxy pass the next request on under its id n and
	// returns the request as the agent got it.
	forward := func(p *scripted, n int) *wire.Message {
		t.Helper()
		m := p.recvMsg()
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":%q,"params":%s}}`, n, m.Method, m.Params))
		return m
	}
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	init := forward(p, 1)
	a.reply(a.recvMsg(), `{"protocolVersion":1}`)
	p.recvMsg() // the agent's answer
	p.reply(init, `{"protocolVersion":1}`)
	e.recvMsg()

	e.send(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	forward(p, 2)
	first := a.recvMsg()
	p.w.Close() // the proxy dies
	if m := e.recvMsg(); string(m.ID) != "10" || m.Error == nil {
		t.Fatalf("prompt 10 got %s, want an error", m.Bytes())
	}
	if m := a.recvMsg(); m.Method != wire.MethodCancelRequest || string(wire.Member(m.Params, "requestId")) != string(first.ID) {
		t.Errorf("the agent got %s, want a cancel for the dead proxy's request %s", m.Bytes(), first.ID)
	}

	p = proxyStarted()
	init = forward(p, 1) // the replayed initialize, answered by the conductor
	p.recvMsg()
	p.reply(init, `{"protocolVersion":1}`)
	e.send(`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	forward(p, 2)
	second := a.recvMsg()
	a.reply(first, `{"stopReason":"end_turn","answers":"the dead proxy's prompt"}`)
	a.reply(second, `{"stopReason":"end_turn","answers":"prompt 12"}`)
	answer := p.recvMsg()
	if !strings.Contains(string(answer.Result), "prompt 12") {
		t.Fatalf("the new proxy's request 2 was answered with %s", answer.Result)
	}
}

// TestBypassOrphansRequests: a proxy forwards a prompt to the agent, and
// the agent's permission request to the editor, and dies; it is bypassed.
// As under a restart, nobody waits for what the dead proxy asked any
// more: the agent is told to cancel the prompt and the editor the
// permission request, each by the id it got it under, besides the errors
// for what was pending on the proxy.
func TestBypassOrphansRequests(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
	proxy.OnFailure = PolicyBypass
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent})
	p, a := proxyStarted(), agentStarted()

	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	init := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	a.reply(a.recvMsg(), `{"protocolVersion":1}`)
	p.recvMsg() // the agent's answer
	p.reply(init, `{"protocolVersion":1}`)
	e.recvMsg()

	e.send(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}}`)
	prompt := a.recvMsg()
	a.send(`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s"}}`)
	p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"sessionId":"s"}}`)
	perm := e.recvMsg()
	if perm.Method != "session/request_permission" {
		t.Fatalf("the editor got %s, want the permission request", perm.Bytes())
	}
	p.w.Close() // the proxy dies

	var editorCancelled, promptFailed bool
	for !editorCancelled || !promptFailed {
		switch m := e.recvMsg(); {
		case string(m.ID) == "10" && m.Error != nil:
			promptFailed = true
		case m.Method == wire.MethodCancelRequest && string(wire.Member(m.Params, "requestId")) == string(perm.ID):
			editorCancelled = true
		default:
			t.Fatalf("the editor got %s, want an error for prompt 10 and a cancel for request %s", m.Bytes(), perm.ID)
		}
	}
	var agentCancelled, permissionFailed bool
	for !agentCancelled || !permissionFailed {
		switch m := a.recvMsg(); {
		case string(m.ID) == "7" && m.Error != nil:
			permissionFailed = true
		case m.Method == wire.MethodCancelRequest && string(wire.Member(m.Params, "requestId")) == string(prompt.ID):
			agentCancelled = true
		default:
			t.Fatalf("the agent got %s, want an error for request 7 and a cancel for the dead proxy's prompt %s", m.Bytes(), prompt.ID)
		}
	}
}

// TestStartFailureAnswersUnreadable: a chain that cannot start answers
// what it cannot read as a running chain does, as JSON-RPC prescribes
// (-32700 for a line that is not JSON, -32600 for JSON that is no message
// or an empty batch, under a null id), with why it did not start, and goes
// on waiting for a request, which it answers under its id.
func TestStartFailureAnswersUnreadable(t *testing.T) {
	for _, tt := range []struct {
		line string
		code int
	}{
		{`not json`, -32700},
		{`{"jsonrpc":"2.0","id":3,"method":"initial`, -32700},
		{`{}`, -32600},
		{`[]`, -32600},
	} {
		t.Run(tt.line, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(t.Context(), Config{Agent: Component{Name: "missing", Command: filepath.Join(t.TempDir(), "no-such-agent")}},
				strings.NewReader(tt.line+"\n"+`{"jsonrpc":"2.0","method":"note"}`+"\n"+initLine+"\n"), &out)
			if err == nil || !strings.Contains(err.Error(), "missing") {
				t.Errorf("Run = %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("wrote %q; want two answers", out.String())
			}
			for i, want := range []struct {
				id   string
				code int
			}{{"null", tt.code}, {"0", -32603}} {
				var resp struct {
					ID    json.RawMessage
					Error *struct {
						Code    int
						Message string
					}
				}
				if json.Unmarshal([]byte(lines[i]), &resp) != nil || string(resp.ID) != want.id || resp.Error == nil ||
					resp.Error.Code != want.code || !strings.Contains(resp.Error.Message, "missing") {
					t.Errorf("answer %d is %s; want error %d naming the agent under id %s", i, lines[i], want.code, want.id)
				}
			}
		})
	}
}
