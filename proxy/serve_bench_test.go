package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// The lines BenchmarkPassthrough and TestPassthroughAllocs forward.
const (
	passUpdate = `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}}` + "\n"
	passCancel = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"%s"}}` + "\n"
)

// passRequests returns n prompts from the predecessor, each followed by the
// answer to the request the proxy relays for it: a fresh proxy numbers its
// own requests from 1.
func passRequests(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`+"\n", i)
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}`+"\n", i)
	}
	return b.Bytes()
}

// BenchmarkPassthrough measures what a proxy built with this package costs
// per message it only forwards, the share of each added hop that is not
// system calls and scheduling: a session/update from the successor, which
// leaves unwrapped; a session/cancel from the predecessor, which leaves
// wrapped; and a session/prompt relayed to the successor, with its answer
// passed back.
func BenchmarkPassthrough(b *testing.B) {
	// Each op is one Serve of n messages (requests, for request: each with
	// its answer), so that start-up is noise; the last metric is per one.
	for _, tc := range []struct {
		name, per string
		n         int
		input     []byte
	}{
		{"update", "ns/msg", 1000, bytes.Repeat([]byte(fmt.Sprintf(passUpdate, "hello")), 1000)},
		{"cancel", "ns/msg", 1000, bytes.Repeat([]byte(fmt.Sprintf(passCancel, "s1")), 1000)},
		{"request", "ns/request", 500, passRequests(500)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.input)))
			b.ReportAllocs()
			p := new(proxy.Proxy)
			for b.Loop() {
				if err := p.Serve(context.Background(), bytes.NewReader(tc.input), discard{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tc.n), tc.per)
		})
	}
}

// BenchmarkHandledUpdate measures what a handler costs per message it
// takes: a FromSuccessor session/update handler that forwards every update
// unchanged, as one that filters or records the stream does for most.
// Against BenchmarkPassthrough's update, the difference is the handler's
// goroutine, its place in the outgoing order and its Request.
func BenchmarkHandledUpdate(b *testing.B) {
	// As BenchmarkPassthrough, each op is one Serve of n updates.
	const n = 1000
	input := bytes.Repeat([]byte(fmt.Sprintf(passUpdate, "hello")), n)
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	p := &proxy.Proxy{FromSuccessor: map[string]proxy.Handler{
		"session/update": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
			return r.Forward(ctx)
		},
	}}
	for b.Loop() {
		if err := p.Serve(context.Background(), bytes.NewReader(input), discard{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

// TestPassthroughAllocs pins what a proxy allocates per message it only
// forwards, as the difference between serving 2,000 lines and 1,000: the
// line read, and the line written (unwrapped or wrapped). A parsed message
// or an error target made per line, or an envelope's buffer that grows,
// shows as one more. (AllocsPerRun runs with one P, so the writer takes
// the lines in a few large batches: what a write costs is not seen here.)
func TestPassthroughAllocs(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"update", fmt.Sprintf(passUpdate, "hello")},
		{"cancel", fmt.Sprintf(passCancel, "s1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := func(lines int) float64 {
				input := bytes.Repeat([]byte(tc.line), lines)
				out := new(countLines)
				n := testing.AllocsPerRun(10, func() {
					if err := new(proxy.Proxy).Serve(context.Background(), bytes.NewReader(input), out); err != nil {
						t.Fatal(err)
					}
				})
				if want := 11 * lines; out.n != want {
					t.Fatalf("%d lines forwarded, want %d", out.n, want)
				}
				return n
			}
			// The writer's list of lines grows to the largest batch it
			// takes, which scheduling decides: a few allocations either way.
			perLine := (serve(2000) - serve(1000)) / 1000
			if perLine < 1.9 || perLine > 2.1 {
				t.Errorf("%.3f allocations per forwarded line, want 2", perLine)
			}
		})
	}
}

// TestRelayedRequestAllocs pins what a proxy allocates for a request it
// only relays, and the answer it passes back: the two lines read, the two
// written, the call it records (with its entry among the requests served),
// and the caller's id, kept as that entry's key. An id of its own made as
// a line of its own, a map key made per call, or a line that grows, shows
// as one more.
func TestRelayedRequestAllocs(t *testing.T) {
	serve := func(n int) float64 {
		input := passRequests(n)
		out := new(countLines)
		allocs := testing.AllocsPerRun(10, func() {
			out.n = 0
			if err := new(proxy.Proxy).Serve(context.Background(), bytes.NewReader(input), out); err != nil {
				t.Fatal(err)
			}
		})
		if out.n != 2*n {
			t.Fatalf("%d lines written, want %d (each request relayed and answered)", out.n, 2*n)
		}
		return allocs
	}
	perRequest := (serve(2000) - serve(1000)) / 1000
	if perRequest < 5.9 || perRequest > 6.1 {
		t.Errorf("%.3f allocations per relayed request and its answer, want 6", perRequest)
	}
}

// countLines counts the lines written to it.
type countLines struct{ n int }

func (w *countLines) Write(p []byte) (int, error) {
	w.n += bytes.Count(p, []byte("\n"))
	return len(p), nil
}
func (*countLines) Close() error { return nil }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

var _ io.WriteCloser = discard{}
