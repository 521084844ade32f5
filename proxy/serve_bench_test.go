package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// BenchmarkPassthrough measures what a proxy built with this package costs
// per message it only forwards, the share of each added hop that is not
// system calls and scheduling: a session/update from the successor, which
// leaves unwrapped, and a session/cancel from the predecessor, which leaves
// wrapped.
func BenchmarkPassthrough(b *testing.B) {
	const update = `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}}` + "\n"
	const cancel = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"%s"}}` + "\n"
	for _, tc := range []struct{ name, line string }{
		{"update", fmt.Sprintf(update, "hello")},
		{"cancel", fmt.Sprintf(cancel, "s1")},
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

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

var _ io.WriteCloser = discard{}
