// Command goproxy [NAME] is a passthrough ACP proxy (proxy-chains RFD) used by the
// integration tests. It is written independently of the conductor's own code,
// with only encoding/json, so the two do not share mistakes.
//
// It speaks to its conductor on stdio and forwards everything unchanged:
// proxy/initialize and every plain message from the predecessor go out wrapped
// in proxy/successor; proxy/successor (or _proxy/successor) messages from the
// conductor come from the successor and go back to the predecessor unwrapped.
// Requests are re-issued under the proxy's own ids and their responses
// returned to the original ids; a $/cancel_request for a relayed request
// becomes a plain one for the id the proxy relayed it under. Raw values are
// otherwise copied as they arrived.
//
// One goroutine reads and dispatches each line at once, never waiting for a
// response, so requests flow in both directions together and each direction
// keeps its order.
//
// With ACP_IT_DIALECT=rust it speaks the Rust SDK's dialect instead: it
// refuses proxy/initialize as an unknown method, takes _proxy/initialize,
// and wraps in _proxy/successor.
//
// With ACP_IT_STALL_FIFO=PATH it stops reading once it has forwarded the
// first session/prompt, until something is written to the named pipe PATH:
// a proxy that stops reading, for the memory tests.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"sync"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type successorParams struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// trace, set by ACP_IT_TRACE=1, logs every line in and out on stderr.
var trace = os.Getenv("ACP_IT_TRACE") == "1"

type proxy struct {
	wmu sync.Mutex
	w   *bufio.Writer

	nextID  int64
	pending map[string]json.RawMessage // our id -> id we owe an answer to
	relayed map[string]json.RawMessage // side + id we owe an answer to -> our id
	sideOf  map[string]string          // our id -> the side + id key of relayed

	rust  bool   // ACP_IT_DIALECT=rust
	stall string // ACP_IT_STALL_FIFO; cleared once it has stalled
	stop  bool   // stall before reading the next line
}

// send writes m with its raw members copied byte for byte (encoding/json
// would compact them and escape HTML characters).
func (p *proxy) send(m *message) {
	b := make([]byte, 0, 64+len(m.Params)+len(m.Result)+len(m.Error))
	b = append(b, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		b = append(append(b, `,"id":`...), m.ID...)
	}
	if m.Method != "" {
		name, _ := json.Marshal(m.Method)
		b = append(append(b, `,"method":`...), name...)
		if m.Params != nil {
			b = append(append(b, `,"params":`...), m.Params...)
		}
	}
	if m.Result != nil {
		b = append(append(b, `,"result":`...), m.Result...)
	}
	if m.Error != nil {
		b = append(append(b, `,"error":`...), m.Error...)
	}
	b = append(b, "}\n"...)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if trace {
		log.Printf("-> %s", b[:len(b)-1])
	}
	p.w.Write(b)
	if err := p.w.Flush(); err != nil {
		log.Printf("write: %v", err)
	}
}

// Sides a request came from, in the keys of relayed.
const (
	fromPredecessor = "p:"
	fromSuccessor   = "s:"
)

func (p *proxy) request(from, method string, params, answerTo json.RawMessage) {
	p.nextID++
	id := json.RawMessage(strconv.Quote("go-" + strconv.FormatInt(p.nextID, 10)))
	p.pending[string(id)] = answerTo
	key := from + string(answerTo)
	p.relayed[key] = id
	p.sideOf[string(id)] = key
	p.send(&message{ID: id, Method: method, Params: params})
}

// cancel handles a $/cancel_request from the conductor, plain or (as older
// conductors sent it) wrapped: it names a request the proxy received on
// this connection, from either side, and the proxy cancels in turn the
// request it relayed it as, with a plain $/cancel_request under its own id,
// as the ACP schema says for every hop. A cancel for anything else is
// dropped: cancellation is never forwarded.
func (p *proxy) cancel(params json.RawMessage) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil {
		log.Printf("dropping malformed $/cancel_request %s", params)
		return
	}
	for _, from := range []string{fromPredecessor, fromSuccessor} {
		if ours, ok := p.relayed[from+string(fields["requestId"])]; ok {
			fields["requestId"] = ours
			b, _ := json.Marshal(fields)
			p.send(&message{Method: "$/cancel_request", Params: b})
			return
		}
	}
}

func (p *proxy) fail(id json.RawMessage, code int, msg string) {
	e, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	p.send(&message{ID: id, Error: e})
}

func (p *proxy) handle(line []byte) {
	if trace {
		log.Printf("<- %s", line)
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		log.Printf("dropping unparseable line: %v", err)
		return
	}
	if m.Method == "" { // a response to one of ours
		answerTo, ok := p.pending[string(m.ID)]
		if !ok {
			log.Printf("response to unknown id %s", m.ID)
			return
		}
		delete(p.pending, string(m.ID))
		delete(p.relayed, p.sideOf[string(m.ID)])
		delete(p.sideOf, string(m.ID))
		if m.Error != nil {
			p.send(&message{ID: answerTo, Error: m.Error})
		} else {
			if m.Result == nil {
				m.Result = json.RawMessage("null")
			}
			p.send(&message{ID: answerTo, Result: m.Result})
		}
		return
	}
	switch m.Method {
	case "proxy/successor", "_proxy/successor": // from the successor
		var inner successorParams
		if err := json.Unmarshal(m.Params, &inner); err != nil || inner.Method == "" {
			if m.ID != nil {
				p.fail(m.ID, -32602, fmt.Sprintf("bad %s params", m.Method))
			}
			return
		}
		if m.ID == nil {
			if inner.Method == "$/cancel_request" {
				p.cancel(inner.Params)
				return
			}
			p.send(&message{Method: inner.Method, Params: inner.Params})
		} else {
			p.request(fromSuccessor, inner.Method, inner.Params, m.ID)
		}
	default: // from the predecessor
		method, initialize, envelope := m.Method, "proxy/initialize", "proxy/successor"
		if p.rust {
			initialize, envelope = "_proxy/initialize", "_proxy/successor"
			if method == "proxy/initialize" {
				p.fail(m.ID, -32601, "Method not found: proxy/initialize")
				return
			}
		}
		if method == initialize {
			method = "initialize"
		}
		if method == "$/cancel_request" && m.ID == nil {
			p.cancel(m.Params)
			return
		}
		name, _ := json.Marshal(method)
		wrapped := append([]byte(`{"method":`), name...)
		if m.Params != nil {
			wrapped = append(append(wrapped, `,"params":`...), m.Params...)
		}
		wrapped = append(wrapped, '}')
		if m.ID == nil {
			p.send(&message{Method: envelope, Params: wrapped})
		} else {
			p.request(fromPredecessor, envelope, wrapped, m.ID)
		}
		p.stop = p.stall != "" && method == "session/prompt"
	}
}

func main() {
	name := os.Getenv("ACP_IT_PROXY_NAME")
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	if name == "" {
		name = "go-proxy"
	}
	log.SetFlags(0)
	log.SetPrefix(fmt.Sprintf("[%s %d] ", name, os.Getpid()))
	p := &proxy{w: bufio.NewWriterSize(os.Stdout, 64<<10), pending: map[string]json.RawMessage{},
		relayed: map[string]json.RawMessage{}, sideOf: map[string]string{},
		rust: os.Getenv("ACP_IT_DIALECT") == "rust", stall: os.Getenv("ACP_IT_STALL_FIFO")}
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	log.Print("started")
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if trimmed := trimSpace(line); len(trimmed) > 0 {
				p.handle(trimmed)
			}
		}
		if p.stop {
			log.Print("stalled: not reading")
			if _, err := os.ReadFile(p.stall); err != nil {
				log.Printf("stall: %v", err)
			}
			log.Print("reading again")
			p.stall, p.stop = "", false
		}
		if err != nil {
			if err != io.EOF {
				log.Printf("read: %v", err)
			}
			log.Print("stdin closed; exiting")
			return
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}
