package conductor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestOutboxBound: an outbox past its bound says so, and counts in the
// chain's flow state, until its writer has brought it under half.
func TestOutboxBound(t *testing.T) {
	fl := newFlow()
	o := newOutbox(nil, fl) // no direct writes: everything queues
	line := append(bytes.Repeat([]byte("x"), 1000), '\n')
	n := 0
	for ; o.full() == nil; n++ {
		if n > 2*queueBytes/len(line) {
			t.Fatalf("%d lines of %d bytes queued and the outbox is not full", n, len(line))
		}
		o.put(line)
	}
	if n*len(line) <= queueBytes {
		t.Errorf("full after %d bytes, within the bound of %d", n*len(line), queueBytes)
	}
	drained := o.full()
	if fl.over.Load() != 1 {
		t.Errorf("flow counts %d full outboxes, want 1", fl.over.Load())
	}
	lines, _ := o.take(nil, nil)
	o.put(line) // queued while the write is under way: still counted
	select {
	case <-drained:
		t.Fatal("drained before anything was written")
	default:
	}
	o.written()
	<-drained
	if o.full() != nil || fl.over.Load() != 0 {
		t.Errorf("after the write: full %v, flow counts %d", o.full() != nil, fl.over.Load())
	}
	if len(lines) != n {
		t.Errorf("took %d lines, want %d", len(lines), n)
	}
}

// TestOutboxCloseReleases: closing a full outbox lets its waiters go.
func TestOutboxCloseReleases(t *testing.T) {
	fl := newFlow()
	o := newOutbox(nil, fl)
	o.put(make([]byte, queueBytes+1))
	drained := o.full()
	if drained == nil {
		t.Fatal("not full")
	}
	o.close()
	<-drained
	if fl.over.Load() != 0 {
		t.Errorf("flow counts %d full outboxes after close", fl.over.Load())
	}
}

// TestFlowWaitNoCycle: a reader may not wait for its own peer's outbox,
// nor close a cycle of waits longer than two peers; two peers waiting for
// each other are what a pipe between them would give.
func TestFlowWaitNoCycle(t *testing.T) {
	fl := newFlow()
	var ps []*peer
	for i := range 3 {
		ps = append(ps, newPeer("p", i, newLink(nil, nil, nil, fl), zapNop()))
	}
	a, b, c := ps[0], ps[1], ps[2]
	link := func(p *peer) *link { return p.link.Load() }
	if fl.wait(a, link(a), a, false) {
		t.Error("a waits for its own outbox")
	}
	if !fl.wait(a, link(a), b, false) {
		t.Fatal("a may not wait for b, which waits for nobody")
	}
	if !fl.wait(b, link(b), c, false) {
		t.Fatal("b may not wait for c")
	}
	if fl.wait(c, link(c), a, false) {
		t.Error("c waits for a, which waits for c through b")
	}
	if !fl.wait(c, link(c), b, false) {
		t.Error("c may not wait for b, which waits for c: a pair")
	}
	fl.done(link(c))
	fl.done(link(b))
	if !fl.wait(c, link(c), a, false) {
		t.Error("c may not wait for a once b no longer waits")
	}
}

// TestFlowWaitBridged: a bridged MCP connection is one process with the
// agent whose client it is. The agent's reader never waits for it, nor it
// for the agent; a wait through the agent follows every reader of its
// process; and only the owner of the connection's server feeds it.
func TestFlowWaitBridged(t *testing.T) {
	fl := newFlow()
	var ps []*peer
	for i, name := range []string{"client", "owner", "agent"} {
		ps = append(ps, newPeer(name, i, newLink(nil, nil, nil, fl), zapNop()))
	}
	client, owner, agent := ps[0], ps[1], ps[2]
	b := newPeer("mcp:tools", -1, newLink(nil, nil, nil, fl), zapNop())
	b.ends = &bridgeEnds{host: agent, owner: owner}
	fl.join(b)
	c := &chain{peers: ps, flow: fl}
	link := func(p *peer) *link { return p.link.Load() }

	if got := c.feeds(b); len(got) != 1 || got[0] != owner {
		t.Errorf("the connection's reader may wait for %v, want its owner alone", names(got))
	}
	if got := c.feeds(owner); !slices.Contains(got, b) {
		t.Errorf("the owner's reader may wait for %v, not the connection it feeds", names(got))
	}
	if got := c.feeds(client); slices.Contains(got, b) {
		t.Errorf("the client's reader may wait for %v, the connection it does not feed among them", names(got))
	}
	if fl.wait(agent, link(agent), b, false) || fl.wait(b, link(b), agent, false) {
		t.Error("the agent and its own MCP client wait for each other")
	}
	if !fl.wait(owner, link(owner), b, false) {
		t.Fatal("the owner may not wait for the connection, which waits for nobody")
	}
	if !fl.wait(b, link(b), owner, false) {
		t.Error("the connection may not wait for its owner, which waits for it: a pair")
	}
	if !fl.wait(client, link(client), owner, false) {
		t.Error("the client may not wait for the owner, which does not wait for the client")
	}
	if fl.wait(agent, link(agent), client, false) {
		t.Error("the agent waits for the client, which waits for the agent's MCP client through the owner")
	}
	fl.leave(b) // its outbox closed: the owner's wait for it is over
	fl.done(link(owner))
	if got := c.feeds(owner); slices.Contains(got, b) {
		t.Error("a closed connection is still fed")
	}
	if !fl.wait(agent, link(agent), client, false) {
		t.Error("the agent may not wait for the client once its MCP client has gone")
	}
}

func names(ps []*peer) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.name)
	}
	return s
}

// TestMCPBridgedFlow runs more MCP traffic through a stdio-bridged
// connection than an outbox may hold, at a side that does not read: the
// owner's reader pauses for an MCP client that does not read, and the
// client's reader for an owner that does not; once the side reads again,
// everything arrives, in order.
func TestMCPBridgedFlow(t *testing.T) {
	const n = 48 // of floodPad: three times the bound
	for _, tc := range []struct {
		name, owner, agent string
		reader, full       string // the pause awaited
	}{
		{"client stops reading", "ACP_TEST_MCP_FLOOD_OUT", "ACP_TEST_MCP_FLOOD_OUT", "owner", "mcp:owner-tools"},
		{"owner stops reading", "", "ACP_TEST_MCP_FLOOD_IN", "mcp:owner-tools", "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "stall")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			stall := "ACP_TEST_MCP_STALL=" + fifo
			ownerEnv := []string{"ACP_TEST_MCP_SPELLING=id", stall}
			if tc.owner != "" {
				ownerEnv = append(ownerEnv, tc.owner+"="+strconv.Itoa(n))
			}
			core, logs := observer.New(zap.DebugLevel)
			e := startChain(t, Config{
				Proxies:   []Component{fake(t, dir, "owner", "mcp-owner", ownerEnv...), fake(t, dir, "middle", "proxy")},
				Agent:     fake(t, dir, "agent", "mcp-stdio-agent", tc.agent+"="+strconv.Itoa(n), stall),
				Logger:    zap.New(core),
				MCPBridge: BridgeStdio,
			})
			e.send(initLine)
			e.recvMsg()
			e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			for m := e.recvMsg(); string(m.ID) != "1"; m = e.recvMsg() {
			}
			e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
			pauses := func() int {
				return logs.FilterMessage("paused reading: a peer's queue is full").
					FilterField(zap.String("peer", tc.reader)).FilterField(zap.String("full", tc.full)).Len()
			}
			for deadline := time.Now().Add(20 * time.Second); pauses() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s's reader never paused for %s; the pauses: %v", tc.reader, tc.full,
						logs.FilterMessage("paused reading: a peer's queue is full").All())
				}
			}
			if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for m := e.recvMsg(); string(m.ID) != "2"; m = e.recvMsg() {
				label, rest, _ := strings.Cut(updateText(m), " ")
				got[label] = rest
			}
			want := map[string]string{
				"ACP_TEST_MCP_FLOOD_OUT": fmt.Sprintf(`%d in order, then {"content":[]}`, n),
				"ACP_TEST_MCP_FLOOD_IN":  fmt.Sprintf("%d in order", n+1),
			}[tc.agent]
			label := map[string]string{"ACP_TEST_MCP_FLOOD_OUT": "flood-out", "ACP_TEST_MCP_FLOOD_IN": "flood-in"}[tc.agent]
			if got[label] != want || got["shim-exit"] != "<nil>" {
				t.Errorf("the MCP client reported %q and its shim exited %q; want %q and <nil>", got[label], got["shim-exit"], want)
			}
			if err := e.close(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestFlowProxyPairGoesOn: an agent that reads nothing while it streams,
// with a prompt past the bound queued for it, through a proxy that stops
// reading while it cannot write. The proxy's one pipe carries both
// directions: were its reader to wait for the agent's full outbox while
// the agent's reader waits for the proxy's, the stream would stop for
// good, and neither prompt be answered, where with no proxy both are.
func TestFlowProxyPairGoesOn(t *testing.T) {
	dir := t.TempDir()
	hold := filepath.Join(dir, "hold")
	if err := syscall.Mkfifo(hold, 0o600); err != nil {
		t.Fatal(err)
	}
	e := startChain(t, Config{
		Proxies: []Component{fake(t, dir, "p", "proxy")},
		Agent:   fake(t, dir, "agent", "streamer", "ACP_TEST_HOLD_PROMPT="+hold),
	})
	e.send(initLine)
	e.recvMsg()
	// The agent holds the first prompt, reading nothing, while the second
	// fills its outbox past the bound; then it streams about 13 MiB.
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"tag":"a","updates":4000,"sizes":1}}}`)
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"` +
		strings.Repeat("b", 2*queueBytes) + `"}],"_meta":{"tag":"b","updates":1}}}`)
	release(t, hold)
	next := 0
	for want := 1; want <= 2; {
		m := e.recvMsg()
		switch {
		case m.IsResponse() && string(m.ID) == strconv.Itoa(want) && m.Error == nil:
			if want == 1 && next != 4000 {
				t.Fatalf("prompt 1 answered after %d of its 4000 updates", next)
			}
			if want++; want == 2 {
				release(t, hold) // the agent takes the second prompt
			}
		case m.Method == "session/update" && want == 1:
			if got, w := updateText(m), fmt.Sprintf("a#%d", next); strings.TrimRight(got, ".") != w {
				t.Fatalf("update %.20q, want %s", got, w)
			}
			next++
		case m.Method == "session/update" && strings.HasPrefix(updateText(m), "b#0"):
		default:
			t.Fatalf("the editor got %.200s", e.seen[len(e.seen)-1])
		}
	}
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestFlowPairWakesOnce: two proxies' readers, each gone on past the
// other's full outbox for longer than the rule lets them, wait for each
// other, as any pair may. The second to wait wakes the first, which
// waited before the pair formed, to decide again; the first, deciding
// to wait, must not wake the second in turn, which decided with the pair
// in view: each would wake the other for ever, spinning both readers.
func TestFlowPairWakesOnce(t *testing.T) {
	fl := newFlow()
	a := newPeer("a", 1, newLink(nil, nil, nil, fl), zapNop())
	b := newPeer("b", 2, newLink(nil, nil, nil, fl), zapNop())
	la, lb := a.link.Load(), b.link.Load()
	for _, l := range []*link{la, lb} {
		l.out.queued = size{bytes: 2 * queueBytes} // full, and grown by queueBytes
	}
	woken := func(l *link) bool {
		select {
		case <-l.rethink:
			return true
		default:
			return false
		}
	}
	if !fl.wait(a, la, b, true) {
		t.Fatal("a may not wait for b, which waits for nobody")
	}
	lb.pairWith, lb.pairFrom = a, 0
	if !fl.wait(b, lb, a, true) {
		t.Fatal("b, gone on past a for queueBytes, may not wait for it")
	}
	if !woken(la) {
		t.Fatal("a, which waited before the pair formed, is not woken")
	}
	fl.done(la)
	la.pairWith, la.pairFrom = b, 0
	if !fl.wait(a, la, b, true) {
		t.Fatal("a, gone on past b for queueBytes, may not wait for it")
	}
	if woken(lb) {
		t.Error("a wakes b, which waited with the pair in view, and would decide the same")
	}
}
