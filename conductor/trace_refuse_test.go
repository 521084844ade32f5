package conductor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
// be read as the envelope.
func TestTraceConductorAnswers(t *testing.T) {
	for _, detail := range trace.Details {
		t.Run(string(detail), func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			rec := trace.NewRecorder(&out, trace.Options{Detail: detail})
			e := startChain(t, Config{
				Proxies: []Component{fake(t, dir, "crasher", "proxy", "ACP_TEST_CRASH_ON_PROMPT=1")},
				Agent:   fake(t, dir, "agent", "streamer"),
				Trace:   rec,
			})
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
			failedPrompt(t, e, 1, "crasher")
			e.send(promptLine(2, false))
			if m := e.recvMsg(); m.Error == nil || string(m.ID) != "2" {
				t.Fatalf("a prompt after the chain failed was answered %s", e.seen[len(e.seen)-1])
			}
			e.close()
			rec.Close()
			events := readTrace(t, out.String())
			answeredOnce(t, events)
			var got []string
			for _, ev := range events {
				if ev.From == "conductor" || ev.To == "conductor" {
					got = append(got, fmt.Sprintf("%s %s>%s #%s %s", ev.Type, ev.From, ev.To, ev.ID, ev.Method))
				}
			}
			want := "[request client>conductor #7 x response conductor>client #7 x " +
				"request client>conductor #8 proxy/successor response conductor>client #8 proxy/successor " +
				"request client>conductor #2 session/prompt response conductor>client #2 session/prompt]"
			if fmt.Sprint(got) != want {
				t.Errorf("the conductor's answers are traced as\n%v\nwant\n%s\n%s", got, want, &out)
			}
			for _, ev := range events {
				if ev.Type == trace.TypeRequest && string(ev.ID) == "7" && detail == trace.Full && string(ev.Params) != `{"carried":1}` {
					t.Errorf("the refused envelope is traced with params %s, want those it carries", ev.Params)
				}
			}
			if detail == trace.Metadata && strings.Contains(out.String(), "crashing mid-prompt") {
				t.Errorf("a metadata trace holds a component's stderr:\n%s", &out)
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
			var out bytes.Buffer
			rec := trace.NewRecorder(&out, trace.Options{})
			e := startChain(t, Config{
				Proxies: []Component{fake(t, dir, "owner", owner[0], owner[1:]...)},
				Agent:   fake(t, dir, "agent", "mcp-agent"),
				Trace:   rec,
			})
			mcpReports(e)
			e.close()
			rec.Close()
			events := readTrace(t, out.String())
			answeredOnce(t, events)
			var got []string
			for _, ev := range events {
				if ev.From == "conductor" || ev.To == "conductor" {
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
				t.Errorf("the conductor's answers are traced as\n%v\nwant\n%s\n%s", got, want, &out)
			}
		})
	}
}
