package proxy_test

import (
	"bytes"
	"context"
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

// BenchmarkPassthrough measures what a proxy built with this package costs
// per message it only forwards, the share of each added hop that is not
// system calls and scheduling: a session/update from the successor, which
// leaves unwrapped, and a session/cancel from the predecessor, which leaves
// wrapped.
func BenchmarkPassthrough(b *testing.B) {
	for _, tc := range []struct{ name, line string }{
		{"update", fmt.Sprintf(passUpdate, "hello")},
		{"cancel", fmt.Sprintf(passCancel, "s1")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const batch = 1000 // lines per Serve, so that start-up is noise
			input := bytes.Repeat([]byte(tc.line), batch)
			b.SetBytes(int64(len(input)))
			b.ReportAllocs()
			p := new(proxy.Proxy)
			for b.Loop() {
				// An op is a batch; ns/msg below is per message.
				if err := p.Serve(context.Background(), bytes.NewReader(input), discard{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
		})
	}
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
