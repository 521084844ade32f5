package conductor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`

// converse runs initialize, session/new and one prompt with n updates, and
// returns the texts of the updates and the prompt's result.
func converse(t *testing.T, e *editor, updates int) ([]string, string) {
	t.Helper()
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil {
		t.Fatalf("initialize failed: %s", m.Error)
	}
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	e.recvMsg()
	e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"tag":"p","updates":%d}}}`, updates))
	var texts []string
	for {
		m := e.recvMsg()
		if m.IsResponse() {
			return texts, string(m.Result)
		}
		texts = append(texts, updateText(m))
	}
}

func TestChainShapes(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		proxies int
		nested  bool // the agent sits behind a proxy-mode conductor
		empty   bool // ... which has no proxies of its own
	}{
		{name: "agent mode, no proxies", proxies: 0},
		{name: "agent mode, one proxy", proxies: 1},
		{name: "agent mode, three proxies", proxies: 3},
		{name: "nested proxy-mode conductor with one proxy", proxies: 1, nested: true},
		{name: "nested proxy-mode conductor with no proxies", proxies: 0, nested: true, empty: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Agent: fake(t, dir, "agent", "streamer")}
			for i := range tt.proxies {
				cfg.Proxies = append(cfg.Proxies, fake(t, dir, fmt.Sprintf("p%d", i), "proxy"))
			}
			if tt.nested {
				env := []string{"ACP_TEST_INNER_TRANSCRIPT=" + filepath.Join(dir, "inner.txt")}
				if tt.empty {
					env = append(env, "ACP_TEST_INNER_EMPTY=1")
				}
				cfg.Proxies = append(cfg.Proxies, fake(t, dir, "inner-conductor", "conductor", env...))
			}
			e := startChain(t, cfg)
			texts, result := converse(t, e, 5)
			if want := "p#0,p#1,p#2,p#3,p#4"; strings.Join(texts, ",") != want {
				t.Errorf("updates = %v, want %s", texts, want)
			}
			if !strings.Contains(result, `"end_turn"`) {
				t.Errorf("result = %s", result)
			}
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
			agentSaw, _ := os.ReadFile(filepath.Join(dir, "agent.txt"))
			if !strings.HasPrefix(string(agentSaw), `{"jsonrpc":"2.0","id":1,"method":"initialize",`) {
				t.Errorf("agent's first message: %.120s", agentSaw)
			}
			if strings.Contains(string(agentSaw), "proxy/") {
				t.Errorf("proxy methods reached the agent:\n%s", agentSaw)
			}
			if tt.nested && !tt.empty {
				inner, _ := os.ReadFile(filepath.Join(dir, "inner.txt"))
				if !strings.HasPrefix(string(inner), `{"jsonrpc":"2.0","id":1,"method":"proxy/initialize",`) {
					t.Errorf("inner proxy's first message: %.120s", inner)
				}
			}
		})
	}
}

func TestRustDialect(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "rusty", "proxy", "ACP_TEST_RUST_ONLY=1")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	texts, _ := converse(t, e, 2)
	if len(texts) != 2 {
		t.Fatalf("updates = %v", texts)
	}
	e.close()
	saw, _ := os.ReadFile(filepath.Join(dir, "rusty.txt"))
	lines := strings.Split(strings.TrimSpace(string(saw)), "\n")
	if !strings.Contains(lines[0], `"method":"proxy/initialize"`) || !strings.Contains(lines[1], `"method":"_proxy/initialize"`) {
		t.Errorf("want proxy/initialize then _proxy/initialize, saw:\n%s", saw)
	}
	if !strings.Contains(string(saw), `"method":"_proxy/successor","params":{"method":"session/update"`) {
		t.Errorf("updates were not sent in the Rust dialect:\n%s", saw)
	}
}

// TestAgentRefusesInitialize: an agent that refuses initialize as an
// unknown method (-32601) behind a proxy that passes it on is not the
// proxy refusing proxy/initialize. The editor gets the agent's error at
// once, the agent is not asked again in another dialect, and the proxy is
// still spoken to in the dialect it took.
func TestAgentRefusesInitialize(t *testing.T) {
	dir := t.TempDir()
	comp, started := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   comp,
	}))
	ag := started()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	m := ag.recvMsg()
	if m.Method != "initialize" {
		t.Fatalf("the agent was sent %s first", m.Method)
	}
	ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"agent: no initialize here"}}`)
	select {
	case l := <-ag.lines:
		t.Fatalf("the agent was asked again after refusing initialize: %s", l)
	case l := <-ed.lines:
		got, err := wire.Parse(l)
		if err != nil || string(got.ID) != "1" || errorCode(got.Error) != codeMethodNotFound || errorMessage(got.Error) != "agent: no initialize here" {
			t.Fatalf("the editor got %s, want the agent's refusal", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the editor's initialize was never answered")
	}

	// The editor tries again, and this time the agent takes it: the proxy
	// is still addressed as the RFD proxy it showed itself to be.
	ed.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1}`)
	if m := ed.recvMsg(); string(m.ID) != "2" || m.Error != nil {
		t.Fatalf("second initialize: id %s, error %s", m.ID, m.Error)
	}
	saw, _ := os.ReadFile(filepath.Join(dir, "p.txt"))
	var inits []string
	for l := range strings.Lines(string(saw)) {
		if m, err := wire.Parse([]byte(l)); err == nil && m.IsRequest() && strings.Contains(m.Method, "initialize") {
			inits = append(inits, m.Method)
		}
	}
	if strings.Join(inits, " ") != "proxy/initialize proxy/initialize" {
		t.Errorf("the proxy was sent %q, want proxy/initialize twice", inits)
	}
}

// TestRestartedProxyRefusesInitialize: a proxy that passed its initialize
// on and then crashed is restarted as a program that knows only the Rust
// SDK's _proxy/initialize. Its refusal of proxy/initialize is its own, not
// a successor's passed back, as its first process's was: it is asked again
// in the next dialect, and the editor's initialize succeeds.
func TestRestartedProxyRefusesInitialize(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "p")
	proxy.OnFailure = PolicyRestart
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, RestartBackoff: time.Millisecond}))
	p, ag := proxyStarted(), agentStarted()

	// The first process takes proxy/initialize, passes initialize on, and
	// crashes before its successor answers.
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := p.recvMsg(); m.Method != "proxy/initialize" {
		t.Fatalf("the proxy was sent %s first", m.Method)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	if m := ag.recvMsg(); m.Method != "initialize" {
		t.Fatalf("the agent was sent %s", m.Method)
	}
	p.w.Close()

	// The second process refuses proxy/initialize, the replayed one, and
	// takes _proxy/initialize. The editor's initialize, pending on the
	// process that crashed, waits for the replay's answer (see
	// runner.settle); the refusal is the new process's own, so the
	// editor's initialize is tried again in the next dialect rather than
	// answered with it.
	p = proxyStarted()
	m := p.recvMsg()
	if m.Method != "proxy/initialize" {
		t.Fatalf("the restarted proxy was sent %s first, want the replayed proxy/initialize", m.Method)
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no such method"}}`)
	select {
	case l := <-ed.lines:
		t.Fatalf("the editor got %s: the restarted proxy's refusal was taken for its successor's", l)
	case l := <-p.lines:
		if m, _ = wire.Parse(l); m == nil || m.Method != "_proxy/initialize" {
			t.Fatalf("after refusing proxy/initialize the restarted proxy was sent %s, want _proxy/initialize", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the editor's initialize was never answered, nor the proxy asked again")
	}
	p.reply(m, `{"protocolVersion":1}`)
	if m := ed.recvMsg(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("the editor's initialize: %s %s, want the restarted proxy's result", m.Result, m.Error)
	}
}

// TestIDs checks that each hop has its own ids and that the editor's ids come
// back exactly, 1 and "1" being different requests.
func TestIDs(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	e.send(`{"jsonrpc":"2.0","id":"1","method":"initialize","params":{}}`)
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
	e.send(`{"jsonrpc":"2.0","id":-7.5e3,"method":"session/new","params":{}}`)
	e.send(`{"jsonrpc":"2.0","id":null,"method":"session/new","params":{}}`)
	got := map[string]string{}
	for range 4 {
		m := e.recvMsg()
		got[string(m.ID)] = string(m.Result)
	}
	want := map[string]string{
		`"1"`:    `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`,
		`1`:      `{"sessionId":"s1"}`,
		`-7.5e3`: `{"sessionId":"s2"}`,
		`null`:   `{"sessionId":"s3"}`,
	}
	for id, res := range want {
		if got[id] != res {
			t.Errorf("response to id %s = %s, want %s (all: %v)", id, got[id], res, got)
		}
	}
}

// TestConcurrentOrder sends many prompts at once and checks that every
// prompt's updates reach the editor in order and before its response.
func TestConcurrentOrder(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p0", "proxy"), fake(t, dir, "p1", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	e.send(initLine)
	e.recvMsg()
	const prompts, updates = 50, 20
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // write while reading, as a real editor does
		defer wg.Done()
		for i := range prompts {
			e.ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[],"_meta":{"tag":"t%d","updates":%d}}}`, 100+i, i, updates))
		}
	}()
	next := map[string]int{}
	for done := 0; done < prompts; {
		m := e.recvMsg()
		if m.IsResponse() {
			var r struct {
				Meta struct{ Tag string } `json:"_meta"`
			}
			json.Unmarshal(m.Result, &r)
			if next[r.Meta.Tag] != updates {
				t.Fatalf("response for %s after %d of %d updates", r.Meta.Tag, next[r.Meta.Tag], updates)
			}
			done++
			continue
		}
		tag, idx, _ := strings.Cut(updateText(m), "#")
		if want := fmt.Sprint(next[tag]); idx != want {
			t.Fatalf("update %s#%s arrived, want #%s", tag, idx, want)
		}
		next[tag]++
	}
	wg.Wait()
}

// TestComponentFailure checks that a component that dies fails the chain
// with an error that names it and carries its exit status and stderr.
func TestComponentFailure(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   fake(t, dir, "doomed-agent", "crash"),
	})
	e.send(initLine)
	m := e.recvMsg()
	if m.Error == nil {
		t.Fatalf("initialize succeeded through a dead agent: %s", m.Result)
	}
	var werr wire.Error
	json.Unmarshal(m.Error, &werr)
	if !strings.Contains(werr.Message, "doomed-agent") || !strings.Contains(string(werr.Data), "exit status 7") ||
		!strings.Contains(string(werr.Data), "crashing on purpose") {
		t.Errorf("error does not name the component, its status and stderr: %s", m.Error)
	}
	err := e.close()
	if err == nil || !strings.Contains(err.Error(), "doomed-agent") {
		t.Errorf("Run = %v, want an error naming doomed-agent", err)
	}
}

// TestBadInput checks that garbage from the editor is answered and garbage
// from a component is dropped, and that the chain keeps working after both.
// What would be a request is answered under its id, as it came, when that
// can be read (JSON-RPC 2.0 answers null only when it cannot); a malformed
// response never is, lest the answer pass for one to the editor's own
// request.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "noisy", "proxy", "ACP_TEST_STRAY=1")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	for _, tc := range []struct{ in, id, code string }{
		{`this is not json`, `null`, `-32700`},
		{`{"jsonrpc":"2.0","id":3}`, `null`, `-32600`},
		{`[1,2`, `null`, `-32700`},
		{`"just a string"`, `null`, `-32600`},
		// What would be a request: its id, as it came.
		{`{"id":5,"method":"x"}`, `5`, `-32600`},
		{`{"jsonrpc":"1.0","id":"a","method":"session/new","params":{}}`, `"a"`, `-32600`},
		{`{"jsonrpc":"2.0","id":7,"method":3}`, `7`, `-32600`},
		{`{"jsonrpc":"2.0","method":"","id":8}`, `8`, `-32600`},
		{`{"id":5.0,"method":"x"}`, `5.0`, `-32600`},
		{`{"id":"\u0061","method":"x"}`, `"\u0061"`, `-32600`},
		{`{"id":1,"method":"x","id":-2e3}`, `-2e3`, `-32600`},
		{`{"id":null,"method":"x"}`, `null`, `-32600`},
		// An id that cannot be read, or no request.
		{`{"jsonrpc":"2.0","id":{"n":5},"method":"x"}`, `null`, `-32600`},
		{`{"jsonrpc":"2.0","id":true,"method":"x"}`, `null`, `-32600`},
		{`{"method":"session/cancel"}`, `null`, `-32600`},
		{`{"id":5,"method":"x"`, `null`, `-32700`},
		{`{"id":5,"method":"x"} 1`, `null`, `-32700`},
		// A malformed response.
		{`{"id":5,"result":{}}`, `null`, `-32600`},
		{`{"jsonrpc":"2.0","id":5,"method":"x","result":{}}`, `null`, `-32600`},
	} {
		e.send(tc.in)
		m := e.recvMsg()
		if string(m.ID) != tc.id || !strings.Contains(string(m.Error), `"code":`+tc.code) {
			t.Errorf("%s: got id %s error %s, want id %s code %s", tc.in, m.ID, m.Error, tc.id, tc.code)
		}
	}
	// In a batch, each entry is answered alike.
	e.send(`[{"id":6,"method":"x"},{"id":9,"result":{}}]`)
	if got, want := e.recv(), `[{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}},`+
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}]`; got != want {
		t.Errorf("batch: got\n%s\nwant\n%s", got, want)
	}
	e.send(`{"jsonrpc":"2.0","id":9,"method":"proxy/successor","params":{"method":"x"}}`)
	if m := e.recvMsg(); !strings.Contains(string(m.Error), `"code":-32601`) {
		t.Errorf("envelope from the editor in agent mode: %s", e.seen[len(e.seen)-1])
	}
	texts, _ := converse(t, e, 3)
	if len(texts) != 3 {
		t.Errorf("chain broken after bad input: %v", texts)
	}
}

// TestNotificationBytes checks a notification that nothing changes on its
// hop as the next peer gets it: byte for byte as sent when it is plain, and
// re-encoded from what the conductor read when another reader could take
// it otherwise.
func TestNotificationBytes(t *testing.T) {
	const canonical = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`
	tests := []struct {
		name, sent, want string
	}{
		{"plain, with spacing and an unknown member", ` { "jsonrpc" : "2.0", "method":"session/cancel", "params":{"sessionId":"s1"}, "x-trace":{"span":7} }`, ""},
		{"method repeated", `{"jsonrpc":"2.0","method":"x/other","method":"session/cancel","params":{"sessionId":"s1"}}`, canonical},
		{"escaped member name", `{"jsonrpc":"2.0","meth\u006fd":"session/cancel","params":{"sessionId":"s1"}}`, canonical},
		{"escaped member name, repeated", `{"jsonrpc":"2.0","method":"x/other","params":{"sessionId":"s1"},"meth\u006fd":"session/cancel"}`, canonical},
	}
	dir := t.TempDir()
	e := startChain(t, Config{Agent: fake(t, dir, "agent", "agent")})
	e.send(initLine)
	e.recvMsg()
	for _, tt := range tests {
		e.send(tt.sent)
	}
	// Without its version a message is no JSON-RPC 2.0 message: refused,
	// and never relayed.
	e.send(`{"id":9,"method":"session/cancel","params":{"sessionId":"s1"}}`)
	if m := e.recvMsg(); errorCode(m.Error) != codeInvalidRequest {
		t.Errorf("a message without jsonrpc got %s, want -32600", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	e.recvMsg() // the agent has read every notification before this
	b, err := os.ReadFile(filepath.Join(dir, "agent.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(string(b), "\n")
	if len(got) != 3+len(tests) { // initialize, the notifications, session/new, ""
		t.Fatalf("agent saw:\n%s", b)
	}
	for i, tt := range tests {
		want := tt.want
		if want == "" {
			want = tt.sent
		}
		if got[1+i] != want {
			t.Errorf("%s: agent got\n%s\nwant\n%s", tt.name, got[1+i], want)
		}
	}
}

// TestThreeDialects runs a whole turn through an RFD proxy, a Rust-dialect
// proxy and a Thinkwell-dialect proxy at once: each is detected on its own
// and spoken to in its dialect, in both directions.
func TestThreeDialects(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{
			fake(t, dir, "rfd", "proxy"),
			fake(t, dir, "rust", "proxy", "ACP_TEST_RUST_ONLY=1"),
			fake(t, dir, "thinkwell", "thinkwell"),
		},
		Agent: fake(t, dir, "agent", "agent"),
	})
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"traceparent":"00-abc-def-01"}}}`)
	if m := e.recvMsg(); m.Error != nil || !strings.Contains(string(m.Result), `"x.test/agent":true`) {
		t.Fatalf("initialize: %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if m := e.recvMsg(); string(m.Result) != `{"sessionId":"sess-1"}` {
		t.Fatalf("session/new: %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[]}}`)
	if m := e.recvMsg(); updateText(m) != "thinking" {
		t.Fatalf("want the first update, got %s", e.seen[len(e.seen)-1])
	}
	perm := e.recvMsg()
	if perm.Method != "session/request_permission" {
		t.Fatalf("want a permission request, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(perm.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	read := e.recvMsg()
	if read.Method != "fs/read_text_file" {
		t.Fatalf("want fs/read_text_file, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"result":{"content":"remember the milk"}}`)
	if m := e.recvMsg(); !strings.Contains(updateText(m), "remember the milk") {
		t.Fatalf("want the second update, got %s", e.seen[len(e.seen)-1])
	}
	if m := e.recvMsg(); string(m.ID) != "2" || string(m.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("want the prompt's answer, got %s", e.seen[len(e.seen)-1])
	}
	e.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`)
	if err := e.close(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	saw := func(name string) []string {
		b, _ := os.ReadFile(filepath.Join(dir, name+".txt"))
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	// Each proxy's envelopes, from its successor, in its own dialect.
	for _, tt := range []struct {
		name  string
		first []string // the methods of its first messages: the detection
		envs  []string // the envelopes it may see
	}{
		{"rfd", []string{"proxy/initialize"}, []string{"proxy/successor"}},
		{"rust", []string{"proxy/initialize", "_proxy/initialize"}, []string{"_proxy/successor"}},
		{"thinkwell", []string{"proxy/initialize", "_proxy/initialize", "initialize"}, []string{"_proxy/successor/request", "_proxy/successor/notification"}},
	} {
		lines := saw(tt.name)
		var envelopes int
		for i, line := range lines {
			m, err := wire.Parse([]byte(line))
			if err != nil {
				t.Fatalf("%s saw %s: %v", tt.name, line, err)
			}
			if i < len(tt.first) && m.Method != tt.first[i] {
				t.Errorf("%s's message %d is %s, want %s", tt.name, i, m.Method, tt.first[i])
			}
			if !strings.Contains(m.Method, "proxy/successor") {
				continue
			}
			envelopes++
			switch {
			case m.Method == tt.envs[0] && (len(tt.envs) == 1 || m.IsRequest()):
			case len(tt.envs) == 2 && m.Method == tt.envs[1] && m.IsNotification():
			default:
				t.Errorf("%s got an envelope not of its dialect: %s", tt.name, line)
			}
		}
		// Two updates and two requests came up from the agent through it.
		if envelopes < 4 {
			t.Errorf("%s got %d envelopes, want at least 4:\n%s", tt.name, envelopes, strings.Join(lines, "\n"))
		}
	}
	if init := saw("thinkwell")[2]; !strings.Contains(init, `"_meta":{"traceparent":"00-abc-def-01","proxy":true`) {
		t.Errorf("the Thinkwell proxy's initialize is not marked as a proxy's: %s", init)
	}
	for _, line := range saw("agent") {
		if strings.Contains(line, "proxy") {
			t.Errorf("the agent saw proxy protocol: %s", line)
		}
	}
}

// TestNotAProxy: a component in a proxy's place that refuses every proxy
// initialize and answers a marked initialize as an agent would is no proxy,
// and the editor is told which.
func TestNotAProxy(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "impostor", "agent")},
		Agent:   fake(t, dir, "agent", "agent"),
	})
	e.send(initLine)
	m := e.recvMsg()
	if m.Error == nil || !strings.Contains(string(m.Error), `impostor`) || !strings.Contains(string(m.Error), `not an ACP proxy`) {
		t.Fatalf("want an error naming the impostor, got %s", e.seen[len(e.seen)-1])
	}
}

// TestProxyRefusesEveryInitialize: a component in a proxy's place that
// refuses the initialize of every dialect as an unknown method does not act
// as a proxy. The editor's initialize is answered with an error that names
// it and says so, with the last refusal as its data, rather than with that
// bare refusal.
func TestProxyRefusesEveryInitialize(t *testing.T) {
	dir := t.TempDir()
	comp, started := scriptedComponent(t, dir, "p")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{comp}, Agent: fake(t, dir, "agent", "agent")}))
	p := started()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	var asked []string
	for range wire.Dialects {
		m := p.recvMsg()
		asked = append(asked, m.Method)
		p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
	}
	if strings.Join(asked, " ") != "proxy/initialize _proxy/initialize initialize" {
		t.Errorf("the proxy was asked %q", asked)
	}
	m := ed.recvMsg()
	var e wire.Error
	if m.Error != nil {
		json.Unmarshal(m.Error, &e)
	}
	want := `proxy "p" refused proxy/initialize, _proxy/initialize and initialize marked _meta.proxy: it does not act as an ACP proxy (is it an agent?)`
	if string(m.ID) != "1" || e.Code != codeInternalError || e.Message != want || string(e.Data) != `{"code":-32601,"message":"Method not found"}` {
		t.Fatalf("the editor's initialize was answered %s, want error %d %q with the last refusal as data", m.Error, codeInternalError, want)
	}
}

// TestMethodNotFoundSpelled: an answer the conductor acts on for being
// method-not-found is one however its code is written, as wire.Parse reads
// a code (an integer, 1.0 or 1e3 too): a proxy that refuses its initialize
// is asked in the next dialect; an owner that refuses mcp/connect binds
// per request, and the agent gets a connection; and a bridged client's
// initialize to an owner whose server has no server/discover is answered
// from the declaration.
func TestMethodNotFoundSpelled(t *testing.T) {
	const declared = `{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-06-18","serverInfo":{"name":"tools","version":"0"}}}`
	for _, code := range []string{"-32601", "-32601.0", "-3.2601e4", "-32601E0"} {
		refuse := func(s *scripted, m *wire.Message) {
			s.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":` + code + `,"message":"Method not found"}}`)
		}
		t.Run(code+"/initialize", func(t *testing.T) {
			dir := t.TempDir()
			comp, started := scriptedComponent(t, dir, "p")
			ed := scriptedEditor(startChain(t, Config{Proxies: []Component{comp}, Agent: fake(t, dir, "agent", "agent")}))
			p := started()
			ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
			refuse(p, p.recvMsg())
			if m := firstTo(t, p, ed, "the refusal of proxy/initialize"); m.Method != "_proxy/initialize" {
				t.Errorf("after refusing proxy/initialize the proxy got %s, want _proxy/initialize", m.Raw)
			}
		})
		t.Run(code+"/mcp-connect", func(t *testing.T) {
			ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
			refuse(ed, ed.recvMsg())
			if m := ag.recvMsg(); string(m.ID) != `"open"` || m.Error != nil || wire.Member(m.Result, "connectionId") == nil {
				t.Errorf("the owner refused mcp/connect: the agent got %s, want a connection", m.Raw)
			}
		})
		t.Run(code+"/server-discover", func(t *testing.T) {
			ed, _, decl := mcpChain(t, `{}`, BridgeStdio)
			c := &mcpUser{s: startShim(t, decl)}
			c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
			refuse(ed, ed.recvMsg()) // mcp/connect
			discover := ed.recvMsg()
			if _, method, _ := carried(t, discover); method != "server/discover" {
				t.Fatalf("the owner got %s, want server/discover", discover.Raw)
			}
			refuse(ed, discover)
			if got := string(c.s.recvLine()); got != declared {
				t.Errorf("server/discover refused: the client's initialize got\n%s\nwant\n%s", got, declared)
			}
		})
	}
}

// TestEnvelopeSpoofing: a proxy may not make the next proxy take its words
// for the agent's by nesting envelopes, nor initialize the editor; both are
// refused to it, and the rest of the turn goes on.
func TestEnvelopeSpoofing(t *testing.T) {
	dir := t.TempDir()
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "spoofer", "spoofer"), fake(t, dir, "next", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer"),
	})
	texts, result := converse(t, e, 2)
	if strings.Join(texts, ",") != "p#0,p#1" || !strings.Contains(result, "end_turn") {
		t.Fatalf("the turn did not go on: %v %s", texts, result)
	}
	e.close()
	for _, line := range e.seen {
		if strings.Contains(line, "spoof") || strings.Contains(line, "proxy/initialize") {
			t.Errorf("the editor got a spoofed message: %s", line)
		}
	}
	saw, _ := os.ReadFile(filepath.Join(dir, "spoofer.txt"))
	var nested, upInit *wire.Message
	for _, line := range strings.Split(strings.TrimSpace(string(saw)), "\n") {
		m, err := wire.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		switch string(m.ID) {
		case "9999":
			nested = m
		case "9998":
			upInit = m
		}
	}
	if nested == nil || errorCode(nested.Error) != codeInvalidParams {
		t.Errorf("the nested envelope was not refused with -32602: %+v", nested)
	}
	if upInit == nil || upInit.Error == nil {
		t.Errorf("the upward proxy/initialize was not refused: %+v", upInit)
	}
	next, _ := os.ReadFile(filepath.Join(dir, "next.txt"))
	if strings.Contains(string(next), "spoof") {
		t.Errorf("the next proxy got the spoofed message:\n%s", next)
	}
}

// TestComponentEnv: a variable a component is given replaces the one the
// conductor inherited, with the chain's supervisor and without it. A
// program given a name twice sees the first (Go's os.Getenv, glibc's
// getenv, Node), so the component's value must be the only one.
func TestComponentEnv(t *testing.T) {
	for _, supervise := range []bool{false, true} {
		t.Run(fmt.Sprintf("supervisor %v", supervise), func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("ACP_TEST_TRANSCRIPT", filepath.Join(dir, "inherited.txt"))
			cfg := Config{Agent: fake(t, dir, "agent", "streamer")} // its own ACP_TEST_TRANSCRIPT
			if supervise {
				cfg.Supervisor = supervised(t)
			}
			e := startChain(t, cfg)
			converse(t, e, 1)
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "agent.txt")); err != nil {
				t.Errorf("the agent did not record where its own ACP_TEST_TRANSCRIPT says: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "inherited.txt")); err == nil {
				t.Errorf("the agent recorded where the conductor's ACP_TEST_TRANSCRIPT says")
			}
		})
	}
}

// TestStrayOutputLoggedSparingly has a component print line after line
// that is not JSON-RPC on its stdout: the first few are logged with what
// they said, the last of those saying that later ones are counted, and
// the count once the chain ends, all under the component's name; the
// chain goes on working meanwhile.
func TestStrayOutputLoggedSparingly(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.DebugLevel)
	proxy, proxyStarted := scriptedComponent(t, dir, "chatty")
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	e := startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, Logger: zap.New(core)})
	p, a := proxyStarted(), agentStarted()
	const printed = 100
	for i := range printed {
		p.send(fmt.Sprintf("chatter %d", i))
	}
	e.send(clientInit(0, "a"))
	forwardInit(t, p, "a", func() { answerInit(t, a, "a") })
	initializedFor(t, e, 0, "a")
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	entries := logs.FilterMessageSnippet("not JSON-RPC").All()
	if len(entries) != strayLogged+1 {
		t.Fatalf("logged %d lines for %d stray lines, want %d with their content and one count", len(entries), printed, strayLogged)
	}
	for i, en := range entries {
		ctx := en.ContextMap()
		if ctx["peer"] != "chatty" {
			t.Errorf("entry %d (%s) does not name the component: %v", i, en.Message, ctx)
		}
		switch {
		case i < strayLogged:
			if ctx["line"] != fmt.Sprintf("chatter %d", i) {
				t.Errorf("entry %d has line %v, want chatter %d", i, ctx["line"], i)
			}
			if last := i == strayLogged-1; last != strings.Contains(en.Message, "counted") {
				t.Errorf("entry %d says %q: only the last with content should say later ones are counted", i, en.Message)
			}
		case ctx["count"] != int64(printed):
			t.Errorf("the last entry (%s) counts %v, want %d", en.Message, ctx["count"], printed)
		}
	}
}

// TestComponentInvalidRequestAnswered: a line from a component that would
// be a request, with an id that can be read, but is not JSON-RPC 2.0 is
// answered with -32600 under that id, as the client's is, rather than
// leave the component waiting for ever; its other lines, which may be
// output gone astray, get no answer. Either way the chain goes on.
func TestComponentInvalidRequestAnswered(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		answered   bool
	}{
		{"no version", `{"id":"q","method":"x/ask","params":{}}`, true},
		{"method not a string", `{"jsonrpc":"2.0","id":8,"method":1}`, true},
		{"result and method", `{"jsonrpc":"2.0","id":7,"method":"x/ask","result":{}}`, false},
		{"not JSON", `starting up {"id":9}`, false},
		{"an object, not a message", `{"level":"info","msg":"ready"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			e := startChain(t, Config{Agent: agent})
			a := agentStarted()
			a.send(tc.line)
			a.send(`{"jsonrpc":"2.0","id":100,"method":"x/after","params":{}}`)
			// The editor gets the request after the bad line, so the bad
			// line's answer, if any, went out before it was read.
			after := e.recvMsg()
			if after.Method != "x/after" {
				t.Fatalf("the editor got %s, want x/after", after.Bytes())
			}
			e.send(`{"jsonrpc":"2.0","id":` + string(after.ID) + `,"result":{}}`)
			m := a.recvMsg()
			if tc.answered {
				if m.Error == nil || !strings.Contains(string(m.Error), "-32600") || string(m.ID) == "100" {
					t.Fatalf("the agent got %s, want -32600 under its bad request's id", m.Bytes())
				}
				m = a.recvMsg()
			}
			if string(m.ID) != "100" || m.Error != nil {
				t.Fatalf("the agent got %s, want the answer to x/after", m.Bytes())
			}
			// The editor leaves; once the agent's input has ended, the
			// agent is known to be stopping, and exits.
			e.in.Close()
			for range a.lines {
			}
			a.w.Close()
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
