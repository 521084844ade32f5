package conductor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/trace"
)

// TestTraceConductorAnswers traces requests the conductor answers itself
// and never sends on: an envelope the editor may not send, a malformed
// one, and a prompt after the chain failed. The editor gets an error for
// each, and the trace says who gave it: each is a request from the editor
// to the conductor and the conductor's error, paired by the editor's id;
// a metadata trace keeps only their codes. An envelope is recorded as the
// message it carries, as every relayed envelope is, and one that cannot
// be read as the envelope. The prompt the proxy dies holding was sent to
// it, and its failure is the conductor's: from the conductor, under the
// id the proxy saw.
func TestTraceConductorAnswers(t *testing.T) {
	for _, detail := range trace.Details {
		t.Run(string(detail), func(t *testing.T) {
			dir := t.TempDir()
			e := startTraced(t, Config{
				Proxies: []Component{fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")},
				Agent:   fake(t, dir, "agent", "streamer"),
			}, detail)
			e.send(initLine)
			e.recvMsg()
			e.send(`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"x","params":{"carried":1}}}`)
			if m := e.recvMsg(); m.Error == nil {
				t.Fatalf("the editor's envelope was answered %s", e.seen[len(e.seen)-1])
			}
			e.send(`{"jsonrpc":"2.0","id":8,"method":"proxy/successor","params":{"params":{}}}`)
			if m := e.recvMsg(); m.Error == nil {
				t.Fatalf("the editor's malformed envelope was answered %s", e.seen[len(e.seen)-1])
			}
			e.send(promptLine(1, true))
			failedPrompt(t, e.editor, 1, "crasher")
			e.send(promptLine(2, false))
			if m := e.recvMsg(); m.Error == nil || string(m.ID) != "2" {
				t.Fatalf("a prompt after the chain failed was answered %s", e.seen[len(e.seen)-1])
			}
			events := e.end(t)
			var got []string
			for _, ev := range events {
				if ev.From == "conductor" || ev.To == "conductor" {
					got = append(got, fmt.Sprintf("%s %s>%s #%s %s", ev.Type, ev.From, ev.To, ev.ID, ev.Method))
				}
			}
			want := "[request client>conductor #7 x response conductor>client #7 x " +
				"request client>conductor #8 proxy/successor response conductor>client #8 proxy/successor " +
				"response conductor>client #2 session/prompt request client>conductor #2 session/prompt response conductor>client #2 session/prompt]"
			if fmt.Sprint(got) != want {
				t.Errorf("the conductor's answers are traced as\n%v\nwant\n%s\n%s", got, want, &e.out)
			}
			for _, ev := range events {
				if ev.Type == trace.TypeRequest && string(ev.ID) == "7" && detail == trace.Full && string(ev.Params) != `{"carried":1}` {
					t.Errorf("the refused envelope is traced with params %s, want those it carries", ev.Params)
				}
			}
			if detail == trace.Metadata && strings.Contains(e.out.String(), "crashing mid-prompt") {
				t.Errorf("a metadata trace holds a component's stderr:\n%s", &e.out)
			}
		})
	}
}

// TestTraceDroppedForClosedPeer: an agent streams on to a proxy that has
// exited as the chain stops. The updates that reached the proxy are in
// the trace, and those dropped because it was gone are not: the trace
// holds exactly the updates the proxy received.
func TestTraceDroppedForClosedPeer(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{Detail: trace.Metadata})
	transcript := filepath.Join(dir, "p.txt")
	e := startChain(t, Config{
		Proxies:     []Component{fake(t, dir, "p", "proxy", "ACP_TEST_TRANSCRIPT="+transcript)},
		Agent:       fake(t, dir, "agent", "streamer", "ACP_TEST_STREAM_FOREVER=1", "ACP_TEST_IGNORE_EOF=1"),
		GracePeriod: 200 * time.Millisecond,
		Trace:       rec,
	})
	e.send(initLine)
	e.recvMsg()
	e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	e.recvMsg() // the first update
	if err, _ := e.stopped(); err != nil {
		t.Errorf("Run = %v", err)
	}
	rec.Close()
	traced := 0
	for _, ev := range readTrace(t, out.String()) {
		if ev.From == "agent" && ev.To == "p" && ev.Method == "session/update" {
			traced++
		}
	}
	saw, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Count(string(saw), `"method":"session/update"`)
	if traced != got {
		t.Errorf("the trace has %d updates sent to p, which received %d", traced, got)
	}
}

// TestTraceConductorAnswersMCP traces an agent's MCP-over-ACP session with
// owners that answer no mcp/disconnect (a request-binding owner, and a
// Thinkwell one, which is told by a notification): the conductor answers
// the agent's mcp/disconnect itself, and the trace shows that request to
// the conductor and its answer, as it shows the conductor's refusal of a
// message on an unknown connection.
func TestTraceConductorAnswersMCP(t *testing.T) {
	for name, owner := range map[string][]string{ // role, env
		"request-binding": {"mcp-req-owner"},
		"thinkwell":       {"thinkwell", "ACP_TEST_TW_MCP=sacp"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			e := startTraced(t, Config{
				Proxies: []Component{fake(t, dir, "owner", owner[0], owner[1:]...)},
				Agent:   fake(t, dir, "agent", "mcp-agent"),
			}, trace.Full)
			mcpReports(e.editor)
			events := e.end(t)
			var got []string
			for _, ev := range events {
				if (ev.From == "conductor" || ev.To == "conductor") && (ev.Method == "tools/list" || ev.Method == "mcp/disconnect") {
					s := fmt.Sprintf("%s %s>%s #%s %s", ev.Type, ev.From, ev.To, ev.ID, ev.Method)
					if ev.IsError != nil {
						s += fmt.Sprintf(" is_error=%v", *ev.IsError)
					}
					got = append(got, s)
				}
			}
			want := `[request agent>conductor #"c3" tools/list response conductor>agent #"c3" tools/list is_error=true ` +
				`request agent>conductor #"c4" mcp/disconnect response conductor>agent #"c4" mcp/disconnect is_error=false]`
			if fmt.Sprint(got) != want {
				t.Errorf("the conductor's answers are traced as\n%v\nwant\n%s\n%s", got, want, &e.out)
			}
		})
	}
}

// eventLine is ev as the trace tests compare it: type, from>to, id,
// method, and whether a response is an error.
func eventLine(ev trace.Event) string {
	s := fmt.Sprintf("%s %s>%s #%s %s", ev.Type, ev.From, ev.To, ev.ID, ev.Method)
	if ev.IsError != nil {
		s += fmt.Sprintf(" is_error=%v", *ev.IsError)
	}
	return s
}

// TestTraceTakenAnswers traces answers the conductor takes from a
// component and does not pass on: a proxy's refusals of proxy/initialize
// and _proxy/initialize, after each of which the conductor asks again in
// the next dialect, and a request-binding owner's refusal of mcp/connect,
// after which the conductor opens the connection itself. Each refusal
// goes to the conductor, each retry is the conductor's request, and what
// the caller got is the conductor's answer to the caller's request to
// it: no component is shown answering the caller with what it never got.
func TestTraceTakenAnswers(t *testing.T) {
	t.Run("dialect retries", func(t *testing.T) {
		dir := t.TempDir()
		e := startTraced(t, Config{
			Proxies: []Component{fake(t, dir, "tw", "thinkwell")},
			Agent:   fake(t, dir, "agent", "agent"),
		}, trace.Full)
		e.send(initLine)
		got := e.recvMsg()
		events := e.end(t)
		var lines []string
		var answer json.RawMessage
		for _, ev := range events {
			if ev.From == "agent" || ev.To == "agent" {
				continue
			}
			lines = append(lines, eventLine(ev))
			if ev.Type == trace.TypeResponse && ev.To == "client" {
				answer = ev.Payload
			}
		}
		want := "[request client>tw #1 proxy/initialize response tw>conductor #1 proxy/initialize is_error=true " +
			"request conductor>tw #2 _proxy/initialize response tw>conductor #2 _proxy/initialize is_error=true " +
			"request conductor>tw #3 initialize response tw>conductor #3 initialize is_error=false " +
			"request client>conductor #0 initialize response conductor>client #0 initialize is_error=false]"
		if fmt.Sprint(lines) != want {
			t.Errorf("the initialize is traced as\n%v\nwant\n%s\n%s", lines, want, &e.out)
		}
		if !jsonEqual(answer, got.Result) {
			t.Errorf("the trace answers the editor %s; it got %s", answer, got.Result)
		}
	})
	t.Run("not a proxy", func(t *testing.T) {
		// An agent in a proxy's place answers initialize as an agent: the
		// editor gets the conductor's error saying so, not that success.
		dir := t.TempDir()
		e := startTraced(t, Config{
			Proxies: []Component{fake(t, dir, "impostor", "agent")},
			Agent:   fake(t, dir, "agent", "agent"),
		}, trace.Metadata)
		e.send(initLine)
		if m := e.recvMsg(); m.Error == nil {
			t.Fatalf("initialize answered %s, want an error", e.seen[len(e.seen)-1])
		}
		events := e.end(t)
		var lines []string
		for _, ev := range events {
			lines = append(lines, eventLine(ev))
		}
		if got, want := lines[len(lines)-3:], "[response impostor>conductor #3 initialize is_error=false "+
			"request client>conductor #0 initialize response conductor>client #0 initialize is_error=true]"; fmt.Sprint(got) != want {
			t.Errorf("the initialize ends in the trace as\n%v\nwant\n%s\n%s", got, want, &e.out)
		}
	})
	t.Run("mcp/connect", func(t *testing.T) {
		dir := t.TempDir()
		e := startTraced(t, Config{
			Proxies: []Component{fake(t, dir, "owner", "mcp-req-owner")},
			Agent:   fake(t, dir, "agent", "mcp-agent"),
		}, trace.Full)
		mcpReports(e.editor)
		events := e.end(t)
		var lines []string
		for _, ev := range events {
			if ev.Method == "mcp/connect" {
				lines = append(lines, eventLine(ev))
			}
		}
		want := `[request agent>owner #4 mcp/connect response owner>conductor #4 mcp/connect is_error=true ` +
			`request agent>conductor #"c1" mcp/connect response conductor>agent #"c1" mcp/connect is_error=false]`
		if fmt.Sprint(lines) != want {
			t.Errorf("the mcp/connect is traced as\n%v\nwant\n%s\n%s", lines, want, &e.out)
		}
	})
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestTraceConnectTakenBeforeHeld: a Thinkwell parent proposes its
// connectionId and sends on the connection before its _mcp/connect is
// answered; the owner, of the request binding, refuses mcp/connect, and
// the conductor opens the connection itself, answers the parent, and
// only then lets what the parent sent go to the owner. The trace shows
// the refusal, the parent's connect (spelled as the parent did, the
// owner's as the owner got it) and the conductor's answer before the
// message on the connection goes on, as they happened.
func TestTraceConnectTakenBeforeHeld(t *testing.T) {
	e, reply := ownerUnderParent(t, trace.Metadata)
	e.send(`{"jsonrpc":"2.0","id":10,"method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"tw-1","url":"acp:srv-r"}}}`)
	e.send(`{"jsonrpc":"2.0","id":11,"method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{"connectionId":"tw-1","method":"tools/list","params":{},"id":1}}}`)
	reply("10")
	reply("11")
	events := e.end(t)
	var lines []string
	for _, ev := range events {
		if ev.Method == "mcp/connect" || ev.Method == "_mcp/connect" || ev.Method == "tools/list" && ev.Type == trace.TypeRequest {
			lines = append(lines, fmt.Sprintf("%s %s>%s %s", ev.Type, ev.From, ev.To, ev.Method))
		}
	}
	want := "[request client>owner mcp/connect response owner>conductor mcp/connect " +
		"request client>conductor _mcp/connect response conductor>client _mcp/connect " +
		"request client>owner tools/list]"
	if fmt.Sprint(lines) != want {
		t.Errorf("the connect is traced as\n%v\nwant\n%s\n%s", lines, want, &e.out)
	}
}

// TestTraceTakenConnectSpelling has a Thinkwell-dialect parent connect to
// a request-binding owner, whose refusal of the connect the conductor
// takes, opening the connection itself, and then connect again, which the
// conductor answers at once. Each connect is the parent's request to the
// conductor, and the trace records it as the parent sent it: _mcp/connect,
// with the params its envelope carried.
func TestTraceTakenConnectSpelling(t *testing.T) {
	e, reply := ownerUnderParent(t, trace.Full)
	for _, id := range []string{"10", "11"} {
		e.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"tw-` + id + `","url":"acp:srv-r"}}}`)
		reply(id)
	}
	var got []string
	for _, ev := range e.end(t) {
		if ev.Type == trace.TypeRequest && ev.To == "conductor" {
			got = append(got, eventLine(ev)+" "+string(ev.Params))
		}
	}
	want := `[request client>conductor #10 _mcp/connect {"connectionId":"tw-10","url":"acp:srv-r"} ` +
		`request client>conductor #11 _mcp/connect {"connectionId":"tw-11","url":"acp:srv-r"}]`
	if fmt.Sprint(got) != want {
		t.Errorf("the parent's connects are traced as\n%v\nwant\n%s\n%s", got, want, &e.out)
	}
}

// ownerUnderParent starts a conductor in proxy mode, traced in detail,
// whose one proxy owns the request-binding MCP server srv-r, and plays
// its parent through initialize and session/new. reply reads the
// parent's way to the answer to id, past the owner's notifications on
// the connection, and fails the test if it is an error.
func ownerUnderParent(t *testing.T, detail trace.Detail) (e *tracedChain, reply func(id string)) {
	t.Helper()
	dir := t.TempDir()
	e = startTraced(t, Config{Mode: ProxyMode, Proxies: []Component{fake(t, dir, "owner", "mcp-req-owner")}}, detail)
	next, answer, _ := parentHarness(t, e.editor)
	reply = func(id string) {
		t.Helper()
		for {
			if m := e.recvMsg(); m.IsResponse() {
				if string(m.ID) != id || m.Error != nil {
					t.Fatalf("want the answer to %s, got %s", id, e.seen[len(e.seen)-1])
				}
				return
			}
		}
	}
	e.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	answer(next(true, "initialize", `"protocolVersion":1`), `{"protocolVersion":1,"agentCapabilities":{}}`)
	reply("0")
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	answer(next(true, "session/new", `"url":"acp:srv-r"`), `{"sessionId":"s1"}`)
	reply("1")
	return e, reply
}
