package conductor

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acp-conductor/acp-conductor/trace"
)

// stuckWriter blocks every Write until released, saying when one begins.
type stuckWriter struct{ entered, release chan struct{} }

func newStuckWriter() *stuckWriter {
	return &stuckWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (w *stuckWriter) Write(b []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(b), nil
}

// TestTracedPutLeavesOutboxFree records a message sent in a traced chain
// while recording it blocks (the recorder's writer is stuck, so it drops
// the record and logs so, and the log is stuck too): the outbox must stay
// free meanwhile, for its writer and for the flow control of every other
// peer's reader, which ask what it holds.
func TestTracedPutLeavesOutboxFree(t *testing.T) {
	traceW, logW := newStuckWriter(), newStuckWriter()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logW), zap.DebugLevel))
	rec := trace.NewRecorder(traceW, trace.Options{Buffer: 1, Logger: log})
	params := json.RawMessage(`{}`)
	rec.Send("client", "agent", nil, "first", params, false)
	<-traceW.entered // the recorder's writer is stuck: one more fills its queue
	rec.Send("client", "agent", nil, "second", params, false)

	c := &chain{trace: rec}
	to := &peer{name: "agent", pos: 1, log: zap.NewNop()}
	o := newOutbox(nil, nil)
	sent := make(chan bool)
	go func() { sent <- c.sendTraced(o, nil, false, nil, to, nil, "third", params, []byte("{}\n")) }()
	<-logW.entered // recording the third is stuck logging its drop

	free := make(chan struct{})
	go func() { o.heldBytes(); close(free) }()
	select {
	case <-free:
	case <-time.After(2 * time.Second):
		t.Error("the outbox stays locked while a message to it is being traced")
	}
	close(logW.release)
	close(traceW.release)
	if !<-sent {
		t.Error("the outbox refused the message")
	}
	<-free
	rec.Close()
}
