package trace

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
)

// BenchmarkWrite measures what the writer goroutine spends on one event:
// a streamed agent_message_chunk update, and a prompt's request and
// response, as a chain's trace holds most.
func BenchmarkWrite(b *testing.B) {
	update := json.RawMessage(`{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Here is the next part of the answer, as agents stream it."}}}`)
	prompt := json.RawMessage(`{"sessionId":"sess_1","prompt":[{"type":"text","text":"What is this project about?"}]}`)
	result := json.RawMessage(`{"stopReason":"end_turn"}`)
	for _, detail := range Details {
		b.Run(string(detail)+"/update", func(b *testing.B) {
			w := &writer{detail: detail, out: bufioDiscard()}
			rec := record{kind: kindNotification, from: "agent", to: "client", method: "session/update", body: update}
			b.ReportAllocs()
			for b.Loop() {
				w.write(&rec)
			}
		})
		b.Run(string(detail)+"/request", func(b *testing.B) {
			w := &writer{detail: detail, out: bufioDiscard()}
			req := record{kind: kindRequest, from: "client", to: "agent", id: json.RawMessage(`7`), method: "session/prompt", body: prompt}
			resp := record{kind: kindResponse, from: "agent", to: "client", id: json.RawMessage(`7`), body: result}
			b.ReportAllocs()
			for b.Loop() {
				w.write(&req)
				w.write(&resp)
			}
		})
	}
}

func bufioDiscard() *bufio.Writer { return bufio.NewWriterSize(io.Discard, 64<<10) }
