package conductor

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/trace"
)

// BenchmarkRelay measures the relay path of one message inside the
// conductor, with no processes and no system calls: the framing read of the
// line (from a reader that repeats it forever), parse, routing, re-encoding,
// the destination's outbox, and the framed write (to a writer that discards).
// It is what each hop costs the conductor in CPU and allocations; go run
// ./bench runs it with -benchmem and reports the figures.
//
// Sub-benchmarks are BenchmarkRelay/SIZE/KIND, SIZE being "small" (a typical
// streamed session/update, about 200 bytes) or "1MiB" (the same message with
// a text of 1 MiB), and KIND one of
//
//	copy     framing only: read the line and write it out again, no relay.
//	         The floor any hop pays, the in-process analogue of "direct".
//	notify   a session/update from the agent to the client (no proxies).
//	wrap     the same update from the agent to the last proxy: it goes out
//	         inside a proxy/successor envelope.
//	unwrap   a proxy's proxy/successor envelope to the agent, unwrapped.
//	request  a session/prompt from the client to the agent and its answer
//	         back: two relayed messages per op, with per-hop id tracking.
//	         The prompt carries the payload; the answer is small.
//	written  notify as a chain's reader relays it (wire.LineChannel's lines,
//	         written at once, as to a pipe with room, by the reading
//	         goroutine), its line copied out of the read buffer: the
//	         lend trick off.
//	lent     the same, the line written from the read buffer it was read
//	         into (see lend.go). Both are small only: a line longer than
//	         the buffer, such as 1 MiB, is never lent.
//	notify_traced, request_traced
//	         notify and request with a trace being recorded (package
//	         trace, full detail, to io.Discard): what tracing costs the
//	         relay's goroutine. The trace's writer runs on its own
//	         goroutine; the events it had to leave out are reported as
//	         dropped/op.
func BenchmarkRelay(b *testing.B) {
	for _, size := range []struct {
		name string
		text int
	}{{"small", 64}, {"1MiB", 1 << 20}} {
		text := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", size.text/57+1)[:size.text]
		update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
		envelope := `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}}`
		prompt := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"` + text + `"}]}}`
		answer := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`

		b.Run(size.name, func(b *testing.B) {
			b.Run("copy", func(b *testing.B) { benchCopy(b, update) })
			b.Run("notify", func(b *testing.B) { benchOneWay(b, 0, 1, 0, update) })
			b.Run("wrap", func(b *testing.B) { benchOneWay(b, 1, 2, 1, update) })
			b.Run("unwrap", func(b *testing.B) { benchOneWay(b, 1, 1, 2, envelope) })
			b.Run("request", func(b *testing.B) { benchRequest(b, prompt, answer) })
			if size.name == "small" {
				b.Run("written", func(b *testing.B) { benchPass(b, update, false) })
				b.Run("lent", func(b *testing.B) { benchPass(b, update, true) })
			}
			b.Run("notify_traced", func(b *testing.B) { traced(b, func(b *testing.B) { benchOneWay(b, 0, 1, 0, update) }) })
			b.Run("request_traced", func(b *testing.B) { traced(b, func(b *testing.B) { benchRequest(b, prompt, answer) }) })
		})
	}
}

// benchTrace is the recorder of the chains benchChain makes: nil, except
// while traced runs a benchmark.
var benchTrace *trace.Recorder

// traced runs bench with every chain it makes traced.
func traced(b *testing.B, bench func(*testing.B)) {
	benchTrace = trace.NewRecorder(io.Discard, trace.Options{})
	defer func() {
		benchTrace.Close()
		b.ReportMetric(float64(benchTrace.Dropped())/float64(b.N), "dropped/op")
		benchTrace = nil
	}()
	bench(b)
}

// loopReader returns line (which ends in a newline) over and over, as a
// component that never stops sending it would.
type loopReader struct {
	line []byte
	off  int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		if r.off += c; r.off == len(r.line) {
			r.off = 0
		}
	}
	return n, nil
}

// countingWriter discards what is written, counting the writes, lines and
// bytes so that a benchmark can check that every message was relayed.
type countingWriter struct{ writes, lines, bytes int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.lines += bytes.Count(p, newline)
	w.bytes += len(p)
	return len(p), nil
}

func (w *countingWriter) Close() error { return nil }

// benchChain returns a chain of the given number of proxies, in agent mode,
// whose peers write to counting writers. The peer at each position in feeds
// reads that line over and over; the others read nothing.
func benchChain(proxies int, feeds map[int]string) (*chain, []*countingWriter) {
	log := zap.NewNop()
	c := &chain{log: log, mcp: newMCPRoutes(), flow: newFlow(), trace: benchTrace}
	c.topo.Store(&topology{mode: AgentMode, proxies: proxies})
	var outs []*countingWriter
	for pos := range proxies + 2 {
		w := new(countingWriter)
		var r io.Reader = bytes.NewReader(nil)
		if line, ok := feeds[pos]; ok {
			r = &loopReader{line: []byte(line + "\n")}
		}
		outs = append(outs, w)
		p := newPeer("bench", pos, newLink(wire.NewLineChannel(r, w, 0), nil, nil, c.flow), log)
		p.trace = benchTrace
		c.peers = append(c.peers, p)
	}
	return c, outs
}

// flush does what p's writer goroutine does with one batch: takes every
// queued line and writes them with one SendBuffers. The caller knows that
// something is queued.
func flush(b testing.TB, p *peer, spare *[][]byte) {
	l := p.link.Load()
	lines, ok := l.out.take(nil, *spare)
	if !ok {
		b.Fatal("outbox closed")
	}
	nb := net.Buffers(lines)
	err := l.ch.SendBuffers(&nb)
	l.out.written()
	if err != nil {
		b.Fatal(err)
	}
	clear(lines)
	*spare = lines
}

// relay reads one line from the peer at pos and hands it to the chain, as
// its reader goroutine does.
func relay(b testing.TB, c *chain, pos int) {
	p := c.peers[pos]
	ch := p.link.Load().ch
	line, err := ch.Recv()
	if err != nil {
		b.Fatal(err)
	}
	rd, ok := readers[p]
	if !ok {
		rd = new(reader)
		rd.lc, _ = ch.(*wire.LineChannel)
		readers[p] = rd
	}
	c.receive(p, line, rd)
}

// readers are relay's, one per peer as readLoop has. Benchmarks and tests
// that use relay do not run in parallel.
var readers = make(map[*peer]*reader)

func benchCopy(b *testing.B, line string) {
	w := new(countingWriter)
	ch := wire.NewLineChannel(&loopReader{line: []byte(line + "\n")}, w, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	n := 0
	for b.Loop() {
		l, err := ch.Recv()
		if err != nil {
			b.Fatal(err)
		}
		nb := net.Buffers{l, newline}
		if err := ch.SendBuffers(&nb); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if w.writes != 2*n {
		b.Fatalf("%d writes for %d messages", w.writes, n)
	}
}

// benchOneWay relays a notification read from position from to position to
// in a chain of the given number of proxies.
func benchOneWay(b *testing.B, proxies, from, to int, line string) {
	c, outs := benchChain(proxies, map[int]string{from: line})
	dst := c.peers[to]
	var spare [][]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	n := 0
	for b.Loop() {
		relay(b, c, from)
		flush(b, dst, &spare)
		n++
	}
	if outs[to].lines != n {
		b.Fatalf("%d messages reached position %d, want %d", outs[to].lines, to, n)
	}
}

// benchPass relays a notification from the agent to the client as
// readLoop does (without its holdback), to a writer that takes every line
// at once: lent, or copied out of the read buffer.
func benchPass(b *testing.B, line string, lend bool) {
	defer func(was bool) { lending = was }(lending)
	lending = lend
	c, outs := benchChain(0, map[int]string{1: line})
	agent := c.peers[1].link.Load()
	c.peers[0].link.Load().out.attach(func(segs [][]byte) ([][]byte, error) {
		for _, s := range segs {
			outs[0].Write(s)
		}
		return nil, nil
	})
	rd := c.newReader(agent)
	if lend != (rd.reclaim != nil) {
		b.Fatalf("the reader lends %v, want %v", rd.reclaim != nil, lend)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	n := 0
	for b.Loop() {
		l, err := rd.next(agent.ch)
		if err != nil {
			b.Fatal(err)
		}
		c.receive(c.peers[1], l, rd)
		n++
	}
	if outs[0].lines != n {
		b.Fatalf("%d messages reached the client, want %d", outs[0].lines, n)
	}
}

// benchRequest relays a request from the client to the agent and the
// agent's answer back. The agent's ids restart at 1 for every op, so the
// answer line can stay the same.
func benchRequest(b *testing.B, prompt, answer string) {
	c, outs := benchChain(0, map[int]string{0: prompt, 1: answer})
	client, agent := c.peers[0], c.peers[1]
	var spare [][]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(prompt) + len(answer)))
	n := 0
	for b.Loop() {
		agent.nextID.Store(0)
		relay(b, c, 0)
		flush(b, agent, &spare)
		relay(b, c, 1)
		flush(b, client, &spare)
		n++
	}
	if outs[0].lines != n || outs[1].lines != n {
		b.Fatalf("client got %d answers and agent %d requests, want %d", outs[0].lines, outs[1].lines, n)
	}
	if len(agent.calls) != 0 || client.inflight.n != 0 {
		b.Fatalf("calls left over: %d to the agent, %d from the client", len(agent.calls), client.inflight.n)
	}
}

// TestRelayAllocs pins what relaying a small message allocates inside the
// conductor, from where the read loop hands its line on: nothing for a
// line relayed as it came, the new line for one re-encoded, and for a
// request also its call record, which holds the caller's id when it is
// short (a longer one is copied on its own). A copy of the parsed message,
// a segment list made per line, an id made for the line it is written
// into, or an error target that escapes shows here as one more.
func TestRelayAllocs(t *testing.T) {
	update := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`
	envelope := `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s"}}}`
	prompt := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`
	longID := `{"jsonrpc":"2.0","id":"6f1c2a4e-93b0-4d8e-a1f7-2c5e8b9d0a13","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`
	answer := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	refusal := `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"no such session","data":{"sessionId":"s"}}}`
	for _, tt := range []struct {
		name    string
		proxies int
		lines   []string // read in turn at the positions of from
		from    []int
		want    float64
	}{
		{"notify as its line", 0, []string{update}, []int{1}, 0},
		{"notify wrapped", 1, []string{update}, []int{2}, 1},
		{"envelope unwrapped", 1, []string{envelope}, []int{1}, 1},
		{"request and answer", 0, []string{prompt, answer}, []int{0, 1}, 3},
		{"request and error", 0, []string{prompt, refusal}, []int{0, 1}, 3},
		{"request with a long id, and answer", 0, []string{longID, answer}, []int{0, 1}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := benchChain(tt.proxies, nil)
			lines := make([][]byte, len(tt.lines))
			for i, l := range tt.lines {
				lines[i] = []byte(l)
			}
			rds := make([]*reader, len(c.peers))
			for i := range rds {
				rds[i] = new(reader)
			}
			var spare [][]byte
			out, runs := 0, 0 // lines relayed, and times round
			drain := func() {
				for _, p := range c.peers {
					o := p.link.Load().out
					if segs, _ := o.take(closedChan, spare); len(segs) > 0 {
						for _, seg := range segs {
							out += bytes.Count(seg, newline)
						}
						o.written()
						spare = segs[:0]
					}
				}
			}
			got := testing.AllocsPerRun(200, func() {
				runs++
				c.peers[len(c.peers)-1].nextID.Store(0) // the answer's id stays 1
				for i, line := range lines {
					from := c.peers[tt.from[i]]
					c.handle(from, line, nil, rds[tt.from[i]])
				}
				drain()
			})
			if out != runs*len(lines) {
				t.Fatalf("%d lines relayed for %d read", out, runs*len(lines))
			}
			if got != tt.want {
				t.Errorf("%.1f allocations, want %v", got, tt.want)
			}
		})
	}
}
