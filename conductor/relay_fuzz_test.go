package conductor

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// fuzzChain is one chain, editor and scripted agent, that a fuzz worker
// feeds input after input: a process for each would run a few a second.
// What one input leaves behind (a session, a pending call) meets the
// next, so a failure may need the inputs before it to recur.
type fuzzChain struct {
	ed, ag   io.Writer
	edLines  chan []byte
	agLines  chan []byte
	sentinel int
}

var (
	fuzzChainOnce sync.Once
	theFuzzChain  *fuzzChain
	fuzzChainErr  error
)

// lineChan delivers r's lines, copied.
func lineChan(r io.Reader) chan []byte {
	c := make(chan []byte, 256)
	go func() {
		defer close(c)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c <- bytes.Clone(sc.Bytes())
		}
	}()
	return c
}

// startFuzzChain starts a conductor whose agent is this binary in the
// pipe role, and has the agent answer the editor's initialize. It lives
// as long as the worker.
func startFuzzChain() (*fuzzChain, error) {
	dir, err := os.MkdirTemp("", "acp-fuzz-chain")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	agent := Component{Name: "agent", Command: exe, Env: map[string]string{"ACP_TEST_ROLE": "pipe", "ACP_TEST_SOCKET": sock}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		Run(context.Background(), Config{Agent: agent}, inR, outW)
		outW.Close()
	}()
	ln.SetDeadline(time.Now().Add(20 * time.Second))
	c, err := ln.AcceptUnix()
	ln.Close()
	os.RemoveAll(dir) // the worker has no end to clean up at
	if err != nil {
		return nil, err
	}
	ch := &fuzzChain{ed: inW, ag: c, edLines: lineChan(outR), agLines: lineChan(c)}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	init, ok := <-ch.agLines
	if !ok {
		return nil, io.ErrUnexpectedEOF
	}
	m, err := wire.Parse(init)
	if err != nil {
		return nil, err
	}
	io.WriteString(c, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":1}}`+"\n")
	if _, ok := <-ch.edLines; !ok {
		return nil, io.ErrUnexpectedEOF
	}
	return ch, nil
}

// wellFormed reports whether line is what a peer may be sent: a JSON-RPC
// 2.0 message, or a batch of them.
func wellFormed(line []byte) bool {
	if wire.IsBatch(line) {
		ok := true
		wire.EachElement(line, func(v []byte) {
			_, err := wire.Parse(v)
			ok = ok && err == nil
		})
		return ok
	}
	_, err := wire.Parse(line)
	return err == nil
}

// FuzzChainInput sends the chain, from the editor and from the agent, any
// line at all, and then a request each way: whatever came before, each
// request is relayed and its answer comes back, and every line the
// conductor writes to either side is a JSON-RPC 2.0 message or a batch of
// them. Both sides answer every request they are sent, so that nothing
// the input starts waits for ever.
func FuzzChainInput(f *testing.F) {
	for _, name := range []string{"editor.jsonl", "agent.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
		if err != nil {
			f.Fatal(err)
		}
		for l := range bytes.Lines(data) {
			if name == "editor.jsonl" {
				f.Add(bytes.TrimSpace(l), []byte(nil))
			} else {
				f.Add([]byte(nil), bytes.TrimSpace(l))
			}
		}
	}
	f.Add([]byte(`[{"jsonrpc":"2.0","id":5,"method":"x/a"},{"jsonrpc":"2.0","method":"x/n"},1]`), []byte(`[]`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":6,"method":"_proxy/successor/request","params":{"method":"x","params":{}}}`), []byte(`{"jsonrpc":"2.0","id":7,"method":"mcp/connect","params":{"acpUrl":"acp:x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":{},"method":"x"}`), []byte(`{"jsonrpc":"2.0","id":99,"result":{}}`))
	f.Add([]byte("not json"), []byte(`{"jsonrpc":"2.0","id":1,"error":null}`))
	f.Fuzz(func(t *testing.T, fromEditor, fromAgent []byte) {
		fuzzChainOnce.Do(func() { theFuzzChain, fuzzChainErr = startFuzzChain() })
		if fuzzChainErr != nil {
			t.Fatal(fuzzChainErr)
		}
		ch := theFuzzChain
		ch.sentinel++
		id := `"fuzz-sentinel-` + strconv.Itoa(ch.sentinel) + `"`
		io.WriteString(ch.ed, string(bytes.ReplaceAll(fromEditor, []byte("\n"), nil))+"\n")
		io.WriteString(ch.ag, string(bytes.ReplaceAll(fromAgent, []byte("\n"), nil))+"\n")
		io.WriteString(ch.ed, `{"jsonrpc":"2.0","id":`+id+`,"method":"x/ping","params":{}}`+"\n")
		io.WriteString(ch.ag, `{"jsonrpc":"2.0","id":`+id+`,"method":"x/pong","params":{}}`+"\n")
		// Each side answers what it is asked until its own sentinel's
		// answer comes; the agent also answers the editor's sentinel.
		edDone, agDone := false, false
		timeout := time.After(10 * time.Second)
		for !edDone || !agDone {
			var line []byte
			var ok, fromEd bool
			select {
			case line, ok = <-ch.edLines:
				fromEd = true
			case line, ok = <-ch.agLines:
			case <-timeout:
				t.Fatalf("after %q from the editor and %q from the agent, the chain relays nothing (editor answered %v, agent %v)", fromEditor, fromAgent, edDone, agDone)
			}
			if !ok {
				t.Fatalf("after %q from the editor and %q from the agent, the chain stopped", fromEditor, fromAgent)
			}
			if !wellFormed(line) {
				t.Fatalf("after %q from the editor and %q from the agent, the conductor sent %q", fromEditor, fromAgent, line)
			}
			w := ch.ag
			if fromEd {
				w = ch.ed
			}
			msgs := messagesOf(line)
			for _, m := range msgs {
				switch {
				case m.IsResponse() && string(m.ID) == id:
					if fromEd {
						edDone = true
					} else {
						agDone = true
					}
				case m.IsRequest():
					res := `{}`
					if m.Method == "x/ping" || m.Method == "x/pong" {
						res = `{"pong":true}`
					}
					io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+res+`}`+"\n")
				}
			}
		}
	})
}

// messagesOf returns the messages of line, which wellFormed has passed:
// the one it is, or those of the batch it is.
func messagesOf(line []byte) []*wire.Message {
	var msgs []*wire.Message
	add := func(v []byte) {
		m, _ := wire.Parse(v)
		msgs = append(msgs, m)
	}
	if wire.IsBatch(line) {
		wire.EachElement(line, add)
	} else {
		add(line)
	}
	return msgs
}
