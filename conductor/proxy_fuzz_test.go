package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// proxyFuzzChain is one chain, editor, scripted proxy and scripted agent,
// that a fuzz worker feeds input after input, as fuzzChain is.
type proxyFuzzChain struct {
	ed, px, ag                io.Writer
	edLines, pxLines, agLines chan []byte
	n                         int
	dialect                   *wire.Dialect // the proxy's
	// The proxy forwards what is not the fuzzer's, under ids of its own.
	pending map[string]json.RawMessage // our id -> the id we were sent
	initID  string                     // our id for the initialize
}

var (
	proxyFuzzOnce  [3]sync.Once
	theProxyFuzz   [3]*proxyFuzzChain
	proxyFuzzErr   [3]error
	proxyFuzzSides = [...]string{"editor", "proxy", "agent"}
)

// startProxyFuzzChain starts a conductor with a proxy of dialect dl and an
// agent, both this binary in the pipe role, and initializes the chain
// through them: the proxy refuses the dialects tried before dl.
func startProxyFuzzChain(dl *wire.Dialect) (*proxyFuzzChain, error) {
	dir, err := os.MkdirTemp("", "acp-fuzz-proxy")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // the sockets are needed only until each connects
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var comps [2]Component
	var lns [2]*net.UnixListener
	for i, name := range []string{"proxy", "agent"} {
		sock := filepath.Join(dir, name+".sock")
		if lns[i], err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"}); err != nil {
			return nil, err
		}
		defer lns[i].Close()
		comps[i] = Component{Name: name, Command: exe, Env: map[string]string{"ACP_TEST_ROLE": "pipe", "ACP_TEST_SOCKET": sock}}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		Run(context.Background(), Config{Proxies: comps[:1], Agent: comps[1]}, inR, outW)
		outW.Close()
	}()
	var conns [2]*net.UnixConn
	for i, ln := range lns {
		ln.SetDeadline(time.Now().Add(20 * time.Second))
		if conns[i], err = ln.AcceptUnix(); err != nil {
			return nil, err
		}
	}
	ch := &proxyFuzzChain{
		ed: inW, px: conns[0], ag: conns[1],
		edLines: lineChan(outR), pxLines: lineChan(conns[0]), agLines: lineChan(conns[1]),
		dialect: dl, pending: map[string]json.RawMessage{},
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`+"\n")
	var answer *wire.Message
	err = ch.relay(func(side int, m *wire.Message) bool {
		if side == 0 && m.IsResponse() && string(m.ID) == `"init"` {
			answer = m
		}
		return answer != nil
	})
	if err == nil && answer.Error != nil {
		err = fmt.Errorf("%s", answer.Error)
	}
	if err != nil {
		return nil, fmt.Errorf("initialize (%s): %w", dl.Name, err)
	}
	return ch, nil
}

// relay plays the three sides until done holds for a message one of them
// got: editor and agent answer every request, the proxy forwards. It
// fails if any line the conductor writes is not JSON-RPC, or if an
// envelope it sends the proxy is not of the proxy's dialect.
func (ch *proxyFuzzChain) relay(done func(side int, m *wire.Message) bool) error {
	timeout := time.After(10 * time.Second)
	for {
		var line []byte
		var ok bool
		side := 0
		select {
		case line, ok = <-ch.edLines:
		case line, ok = <-ch.pxLines:
			side = 1
		case line, ok = <-ch.agLines:
			side = 2
		case <-timeout:
			return fmt.Errorf("the chain relays nothing")
		}
		if !ok {
			return fmt.Errorf("the chain stopped (the %s's input ended)", proxyFuzzSides[side])
		}
		if !wellFormed(line) {
			return fmt.Errorf("the conductor sent the %s %q", proxyFuzzSides[side], line)
		}
		msgs := messagesOf(line)
		finished := false
		for _, m := range msgs {
			if side == 1 && wire.IsSuccessor(m.Method) && m.Method != ch.dialect.Successor(m.ID) {
				return fmt.Errorf("the conductor sent a %s proxy %s", ch.dialect.Name, line)
			}
			if done(side, m) {
				finished = true
			}
			switch side {
			case 0, 2:
				if m.IsRequest() {
					res := `{}`
					switch m.Method {
					case "x/ping", "x/pong":
						res = `{"pong":true}`
					case "initialize":
						res = `{"protocolVersion":1}`
					}
					w := ch.ed
					if side == 2 {
						w = ch.ag
					}
					io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+res+`}`+"\n")
				}
			case 1:
				ch.forward(m)
			}
		}
		if finished {
			return nil
		}
	}
}

// forward is the proxy's part: what comes in an envelope goes to the
// predecessor plain, the rest to the successor in an envelope of its
// dialect, and answers go back under the ids they were asked with. It
// refuses the initialize of another dialect, and marks its answer to a
// Thinkwell initialize. Answers to what the fuzzer sent are dropped.
func (ch *proxyFuzzChain) forward(m *wire.Message) {
	if m.IsResponse() {
		if orig, ok := ch.pending[string(m.ID)]; ok {
			delete(ch.pending, string(m.ID))
			res := m.Result
			if string(m.ID) == ch.initID && res != nil {
				res, _ = wire.Thinkwell.InitializeParams(res)
			}
			ch.px.Write(append((&wire.Message{ID: orig, Result: res, Error: m.Error}).Bytes(), '\n'))
		}
		return
	}
	method := m.Method
	if pd := wire.ProxyInitDialect(method); pd != nil || method == wire.MethodInitialize && wire.MarkedProxy(m.Params) {
		if pd != nil && pd != ch.dialect {
			if m.IsRequest() {
				ch.px.Write(append((&wire.Message{ID: m.ID, Error: wire.Errorf(codeMethodNotFound, "%s", method).Encode()}).Bytes(), '\n'))
			}
			return
		}
		method = wire.MethodInitialize
	}
	var id json.RawMessage
	if m.IsRequest() {
		ch.n++
		id = json.RawMessage(`"px-` + strconv.Itoa(ch.n) + `"`)
		ch.pending[string(id)] = m.ID
		if method == wire.MethodInitialize && ch.dialect.InitializeMeta {
			ch.initID = string(id)
		}
	}
	if wire.IsSuccessor(m.Method) {
		method, params, err := wire.Unwrap(m.Params)
		if err != nil {
			return // the conductor sent a bad envelope; the caller's timeout says so
		}
		ch.px.Write(append((&wire.Message{ID: id, Method: method, Params: params}).Bytes(), '\n'))
		return
	}
	ch.px.Write(append(wire.AppendWrapped(nil, id, ch.dialect.Successor(id), method, m.Params), '\n'))
}

// proxyFuzzEnvelope returns line as the proxy sends it: how%4 picks raw or
// an envelope of the RFD's, Rust's or Thinkwell's spelling, with line as
// its params; how&4 makes the envelope a notification rather than a
// request under id; how&8 takes Thinkwell's envelope of the other kind.
// (how>>4)%3 picks the proxy's own dialect (proxyFuzzDialect).
func proxyFuzzEnvelope(line []byte, how byte, id string) []byte {
	var method string
	switch how % 4 {
	case 0:
		return line
	case 1:
		method = wire.MethodSuccessor
	case 2:
		method = wire.MethodSuccessorRust
	case 3:
		method = wire.Thinkwell.SuccessorRequest
		if (how&4 != 0) != (how&8 != 0) {
			method = wire.Thinkwell.SuccessorNotification
		}
	}
	head := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":`
	if how&4 != 0 {
		head = `{"jsonrpc":"2.0","method":"` + method + `","params":`
	}
	return append(append([]byte(head), line...), '}')
}

// proxyFuzzDialect returns the index in wire.Dialects of the dialect
// that how picks for the proxy.
func proxyFuzzDialect(how byte) int { return int(how>>4) % len(wire.Dialects) }

// FuzzProxyInput sends the chain any line from a proxy of any dialect
// between the editor and the agent, raw or as the params of a successor
// envelope of each dialect, then a request from the editor to the agent and one from the
// agent to the editor, both through the proxy: whatever came before, each
// is answered with the answer its asker's peer gave, each request of the
// proxy's line is answered, and every line the conductor writes is a
// JSON-RPC 2.0 message or a batch of them.
func FuzzProxyInput(f *testing.F) {
	// The seeds take the proxy's dialects in turn.
	k := byte(0)
	add := func(line []byte, how byte) {
		f.Add(line, how|k%3<<4)
		k++
	}
	for _, name := range []string{"editor.jsonl", "agent.jsonl", "proxy-a.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
		if err != nil {
			f.Fatal(err)
		}
		for l := range bytes.Lines(data) {
			l = bytes.TrimSpace(l)
			add(l, 0)
			if m, err := wire.Parse(l); err == nil && m.Method != "" {
				// As carried: {"method","params"}.
				inner := []byte(`{"method":` + strconv.Quote(m.Method) + `}`)
				if m.Params != nil {
					inner = []byte(`{"method":` + strconv.Quote(m.Method) + `,"params":` + string(m.Params) + `}`)
				}
				for how := byte(1); how < 4; how++ {
					add(inner, how)
					add(inner, how|4)
				}
			}
		}
	}
	f.Add([]byte(`{"method":"proxy/successor","params":{"method":"x/a"}}`), byte(1))
	f.Add([]byte(`{"method":"initialize","params":{"protocolVersion":1}}`), byte(2))
	f.Add([]byte(`{"method":"x/n","params":[]}`), byte(3|8))
	f.Add([]byte(`{"params":{}}`), byte(1))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"px-1","result":{}}`), byte(0))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":5,"method":"proxy/successor","params":{"method":"x/a"}},1]`), byte(0))
	// Each dialect's envelopes as the proxy's own.
	f.Add([]byte(`{"method":"x/a","params":{}}`), byte(2|1<<4))
	f.Add([]byte(`{"method":"x/n"}`), byte(2|4|1<<4))
	f.Add([]byte(`{"method":"x/a","params":{}}`), byte(3|2<<4))
	f.Add([]byte(`{"method":"x/n"}`), byte(3|4|2<<4))
	f.Add([]byte(`{"method":"x/a","params":{}}`), byte(3|4|8|2<<4))
	f.Add([]byte(`{"method":"initialize","params":{"_meta":{"proxy":true}}}`), byte(3|2<<4))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"_proxy/initialize","params":{}}`), byte(1<<4))
	f.Fuzz(func(t *testing.T, line []byte, how byte) {
		i := proxyFuzzDialect(how)
		proxyFuzzOnce[i].Do(func() { theProxyFuzz[i], proxyFuzzErr[i] = startProxyFuzzChain(wire.Dialects[i]) })
		if proxyFuzzErr[i] != nil {
			t.Fatal(proxyFuzzErr[i])
		}
		ch := theProxyFuzz[i]
		ch.n++
		sentinel := `"fuzz-sentinel-` + strconv.Itoa(ch.n) + `"`
		envID := `"fuzz-env-` + strconv.Itoa(ch.n) + `"`
		sent := proxyFuzzEnvelope(bytes.ReplaceAll(line, []byte("\n"), nil), how, envID)
		ch.px.Write(append(sent, '\n'))
		io.WriteString(ch.ed, `{"jsonrpc":"2.0","id":`+sentinel+`,"method":"x/ping","params":{}}`+"\n")
		io.WriteString(ch.ag, `{"jsonrpc":"2.0","id":`+sentinel+`,"method":"x/pong","params":{}}`+"\n")
		// Each request the line holds is owed an answer, and so is what
		// would be one, under an id that can be read; the rest of what is
		// no JSON-RPC message is a component's stray output, logged and
		// dropped.
		owed := map[string]bool{}
		each := func(v []byte) {
			var id json.RawMessage
			if m, err := wire.Parse(v); err == nil && m.IsRequest() {
				id = m.ID
			} else if err != nil {
				id = wire.ParseErrorID(err)
			}
			if id != nil && ch.pending[string(id)] == nil {
				owed[string(id)] = true
			}
		}
		if wire.IsBatch(sent) {
			wire.EachElement(sent, each)
		} else {
			each(sent)
		}
		edDone, agDone := false, false
		var bad string
		err := ch.relay(func(side int, m *wire.Message) bool {
			switch {
			case !m.IsResponse():
			case side == 1 && owed[string(m.ID)]:
				delete(owed, string(m.ID))
			case side != 1 && string(m.ID) == sentinel:
				if m.Error != nil || !bytes.Equal(m.Result, []byte(`{"pong":true}`)) {
					bad = fmt.Sprintf("the %s's request was answered %s", proxyFuzzSides[side], m.Bytes())
				}
				if side == 0 {
					edDone = true
				} else {
					agDone = true
				}
			}
			return bad != "" || edDone && agDone && len(owed) == 0
		})
		if err == nil && bad != "" {
			err = fmt.Errorf("%s", bad)
		}
		if err != nil {
			t.Fatalf("after the proxy sent %q: %v (editor answered %v, agent %v, unanswered %v)", sent, err, edDone, agDone, slices.Sorted(maps.Keys(owed)))
		}
	})
}
