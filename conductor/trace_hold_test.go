package conductor

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/trace"
)

// TestTraceHeldUntilReplayAnswered traces prompts sent while a crashed
// proxy waits out its back-off: they reach the restarted process only
// once it has answered its replayed initialize, and the trace records
// them there, after that answer, not where they queued.
func TestTraceHeldUntilReplayAnswered(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	cfg := Config{
		Proxies: []Component{restartedCrasher(t, dir, "ACP_TEST_NAIVE_INIT=1")},
		Agent:   fake(t, dir, "agent", "streamer"),
		Trace:   rec,
	}
	h := holdBackoff(&cfg)
	e := startChain(t, cfg)
	initAndCrash(t, e)
	promptsInBackoff(t, e, h, 3)
	awaitResponses(e, 2)
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	rec.Close()
	events := readTrace(t, out.String())
	answeredOnce(t, events)
	var order []string
	for _, ev := range events {
		switch {
		case ev.From == "conductor" && ev.To == "crasher" && ev.Type == trace.TypeRequest:
			order = append(order, "replay")
		case ev.From == "crasher" && ev.To == "conductor" && ev.Type == trace.TypeResponse:
			order = append(order, "replayed")
		case ev.From == "client" && ev.To == "crasher" && ev.Type == trace.TypeRequest && ev.Method == "session/prompt":
			order = append(order, string(wire.Member(wire.Member(ev.Params, "_meta"), "tag")))
		}
	}
	if got, want := fmt.Sprint(order), `["t1" replay replayed "t2" "t3"]`; got != want {
		t.Errorf("the trace has %s, want %s:\n%s", got, want, &out)
	}
}

// TestTraceRefusedReplay has a restarted proxy refuse its replayed
// initialize: the prompts that queued for it were never sent to it, and
// the trace must not say they were. The conductor answered them, and the
// trace says so: each is a request from the editor to the conductor,
// answered by it.
func TestTraceRefusedReplay(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Proxies:      []Component{restartedCrasher(t, dir, "ACP_TEST_REFUSE_AFTER_FIRST="+filepath.Join(dir, "ran"))},
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 1,
	}
	h := holdBackoff(&cfg)
	c := startTraced(t, cfg, trace.Full)
	initAndCrash(t, c.editor)
	promptsInBackoff(t, c.editor, h, 3)
	awaitResponses(c.editor, 2)
	events := c.end(t)
	var toProxy, toConductor []string
	for _, ev := range events {
		if ev.Type != trace.TypeRequest || ev.Method != "session/prompt" {
			continue
		}
		tag := string(wire.Member(wire.Member(ev.Params, "_meta"), "tag"))
		switch {
		case ev.From == "client" && ev.To == "crasher":
			toProxy = append(toProxy, tag)
		case ev.From == "client" && ev.To == "conductor":
			toConductor = append(toConductor, tag)
		}
	}
	slices.Sort(toConductor) // failed together, in no order
	if fmt.Sprint(toProxy) != `["t1"]` || fmt.Sprint(toConductor) != `["t2" "t3"]` {
		t.Errorf("the trace has prompts %v sent to the proxy and %v answered by the conductor, want [\"t1\"] and [\"t2\" \"t3\"]:\n%s", toProxy, toConductor, &c.out)
	}
}

// TestTraceReplayNeverStarted ends the chain while a crashed proxy waits
// out its back-off: no process was started to replay its initialize to,
// nor to take the prompt queued for it, and the trace says neither was
// sent; the conductor answered the prompt.
func TestTraceReplayNeverStarted(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Proxies: []Component{restartedCrasher(t, dir)},
		Agent:   fake(t, dir, "agent", "streamer"),
	}
	h := holdBackoff(&cfg)
	c := startTraced(t, cfg, trace.Full)
	initAndCrash(t, c.editor)
	h.next(t)
	c.send(promptLine(2, false))
	c.sync()
	c.in.Close()
	for {
		if m := c.recvMsg(); m.IsResponse() {
			break
		}
	}
	for _, ev := range c.end(t) {
		if ev.From == "conductor" && ev.Type == trace.TypeRequest || ev.To == "crasher" && string(ev.ID) == "3" {
			t.Errorf("the trace has %s %s -> %s #%s %s, sent to no process:\n%s", ev.Type, ev.From, ev.To, ev.ID, ev.Method, &c.out)
		}
	}
}

// TestTraceResentToGoneSuccessor traces an initialize pending on a proxy
// that dies and is bypassed, sent on to the next proxy, whose output has
// closed (as when its process ends) before the conductor marks it gone:
// the line is dropped, and next never gets the initialize. The trace,
// which shows the failure the editor is answered with as the chain
// stops, has the request that answer answers (the editor's, to the
// conductor), not an answer from next to a request it was never sent.
func TestTraceResentToGoneSuccessor(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{Detail: trace.Metadata})
	proxy, proxyStarted := scriptedComponent(t, dir, "crashy")
	proxy.OnFailure = PolicyBypass
	cfg := Config{Proxies: []Component{proxy, fake(t, dir, "next", "proxy")}, Agent: fake(t, dir, "agent", "agent"), Trace: rec}
	h := holdBypass(t, &cfg)
	chains := make(chan *chain, 1)
	cfg.running = func(c *chain) { chains <- c }
	e := startChain(t, cfg)
	p, c := proxyStarted(), <-chains

	e.send(initLine)
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("the proxy got %s, want its proxy/initialize", m.Bytes())
	}
	p.w.Close() // the proxy, holding the initialize, dies
	<-h.reached // bypassed, its initialize not yet sent on
	c.peers[2].link.Load().out.close()
	h.free()
	if m := e.recvMsg(); string(m.ID) != "0" || m.Error == nil {
		t.Errorf("initialize answered %s, want an error", e.seen[len(e.seen)-1])
	}
	rec.Close()
	events := readTrace(t, out.String())
	answeredOnce(t, events)
	for _, ev := range events {
		if ev.From == "next" || ev.To == "next" {
			t.Errorf("the trace has a message to or from next, which never got the initialize:\n%s", &out)
		}
	}
}

// TestTraceResentPastBypass traces an initialize pending on a proxy that
// dies and is bypassed, and that the conductor sends on to the agent,
// whose answer the editor gets. As with a retry in another dialect, the
// dead proxy's hop ends at the conductor, with the conductor's own report
// (the proxy never answered), the resend is the conductor's own request,
// and the editor's answer is the conductor's to its request to
// "conductor": the editor is shown one answer, the one it got, not a
// failure from the dead proxy it never saw and then the agent's.
func TestTraceResentPastBypass(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "crashy")
	proxy.OnFailure = PolicyBypass
	c := startTraced(t, Config{Proxies: []Component{proxy}, Agent: fake(t, dir, "agent", "agent")}, trace.Metadata)
	p := proxyStarted()

	c.send(initLine)
	if m := p.recvMsg(); m.Method != wire.MethodProxyInitialize {
		t.Fatalf("the proxy got %s, want its proxy/initialize", m.Bytes())
	}
	p.w.Close() // the proxy, holding the initialize, dies
	if m := c.recvMsg(); string(m.ID) != "0" || m.Error != nil {
		t.Fatalf("initialize answered %s, want the agent's answer", c.seen[len(c.seen)-1])
	}
	var lines []string
	for _, ev := range c.end(t) {
		if ev.Method == "initialize" || ev.Method == "proxy/initialize" {
			lines = append(lines, eventLine(ev))
		}
	}
	want := "[request client>crashy #1 proxy/initialize response conductor>conductor #1 proxy/initialize is_error=true " +
		"request conductor>agent #1 initialize response agent>conductor #1 initialize is_error=false " +
		"request client>conductor #0 initialize response conductor>client #0 initialize is_error=false]"
	if fmt.Sprint(lines) != want {
		t.Errorf("the initialize is traced as\n%v\nwant\n%s\n%s", lines, want, &c.out)
	}
}

// TestTraceReplayAnswersWaiter has a Thinkwell-dialect proxy die holding
// the editor's second initialize, and the restarted process answer the
// replay that restores it without the _meta.proxy mark, as an agent
// would. The editor's initialize, which waited for that replay, gets the
// error its hook makes of that answer; the trace shows the proxy's answer
// going to the conductor and the editor answered by the conductor, not
// the proxy answering the editor with a result the editor never got.
func TestTraceReplayAnswersWaiter(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
	proxy.OnFailure = PolicyRestart
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	c := startTraced(t, Config{Proxies: []Component{proxy}, Agent: agent, RestartBackoff: time.Millisecond}, trace.Metadata)
	p, a := proxyStarted(), agentStarted()
	// passOn has the proxy pass its initialize m on, and answer it with
	// its successor's answer, marked if mark.
	passOn := func(p *scripted, m *wire.Message, fromAgent, mark bool) {
		p.send(`{"jsonrpc":"2.0","id":1,"method":"_proxy/successor/request","params":{"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"a"}}}}`)
		if fromAgent {
			answerInit(t, a, "a")
		}
		result := p.recvMsg().Result
		if mark {
			result, _ = wire.Thinkwell.InitializeParams(result)
		}
		p.reply(m, string(result))
	}
	c.send(clientInit(0, "a"))
	for range 2 { // proxy/initialize, _proxy/initialize
		m := p.recvMsg()
		p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no"}}`)
	}
	passOn(p, p.recvMsg(), true, true)
	initializedFor(t, c.editor, 0, "a")

	c.send(clientInit(1, "a"))
	if m := p.recvMsg(); m.Method != wire.MethodInitialize {
		t.Fatalf("the proxy got %s, want its initialize", m.Bytes())
	}
	p.w.Close() // the proxy dies holding it
	p = proxyStarted()
	passOn(p, p.recvMsg(), false, false) // the replay, answered as by an agent
	if m := c.recvMsg(); string(m.ID) != "1" || m.Error == nil {
		t.Fatalf("initialize 1 answered %s, want an error", c.seen[len(c.seen)-1])
	}
	var lines []string // the editor's, from its second initialize on
	for _, ev := range c.end(t) {
		if ev.From == "client" || ev.To == "client" {
			lines = append(lines, eventLine(ev))
		}
	}
	lines = lines[len(lines)-3:]
	want := "[request client>proxy #4 initialize request client>conductor #1 initialize response conductor>client #1 initialize is_error=true]"
	if fmt.Sprint(lines) != want {
		t.Errorf("the editor's second initialize is traced as\n%v\nwant\n%s\n%s", lines, want, &c.out)
	}
}

// TestTraceReinitAnswered has a restarted proxy pass on the replay that
// restores it: the conductor answers that initialize itself, from what
// the agent answered the first time, and the trace says so, as a
// request from the proxy to the conductor and its answer.
func TestTraceReinitAnswered(t *testing.T) {
	dir := t.TempDir()
	proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
	proxy.OnFailure = PolicyRestart
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	c := startTraced(t, Config{Proxies: []Component{proxy}, Agent: agent, RestartBackoff: time.Millisecond}, trace.Metadata)
	p, a := proxyStarted(), agentStarted()
	initializeA(t, c.editor, p, a)
	p.w.Close() // the proxy dies
	restoreWithA(t, proxyStarted(), a, true)
	var lines []string
	for _, ev := range c.end(t) {
		if ev.Method == "initialize" && (ev.From == "conductor" || ev.To == "conductor") {
			lines = append(lines, eventLine(ev))
		}
	}
	want := "[request proxy>conductor #1 initialize response conductor>proxy #1 initialize is_error=false]"
	if fmt.Sprint(lines) != want {
		t.Errorf("the restored proxy's initialize is traced as\n%v\nwant\n%s\n%s", lines, want, &c.out)
	}
}

// TestTraceHeldInitializeFailed has the editor initialize again while a
// crashed proxy waits out its back-off, and the restarted process refuse
// its replayed initialize, which ends the chain: the initialize was never
// sent, and the conductor answered it. The trace records it as the
// editor's request to the conductor, as the editor sent it (initialize,
// not the proxy/initialize it would have gone on as).
func TestTraceHeldInitializeFailed(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Proxies:      []Component{restartedCrasher(t, dir, "ACP_TEST_REFUSE_AFTER_FIRST="+filepath.Join(dir, "ran"))},
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 1,
	}
	h := holdBackoff(&cfg)
	c := startTraced(t, cfg, trace.Metadata)
	initAndCrash(t, c.editor)
	h.next(t)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`)
	c.sync()
	h.release <- struct{}{}
	if m := c.recvMsg(); string(m.ID) != "2" || m.Error == nil {
		t.Fatalf("initialize 2 answered %s, want an error", c.seen[len(c.seen)-1])
	}
	var lines []string
	for _, ev := range c.end(t) {
		if ev.From == "client" && ev.To == "conductor" && ev.Type == trace.TypeRequest {
			lines = append(lines, eventLine(ev))
		}
	}
	if want := "[request client>conductor #2 initialize]"; fmt.Sprint(lines) != want {
		t.Errorf("the held initialize is traced as\n%v\nwant\n%s\n%s", lines, want, &c.out)
	}
}
