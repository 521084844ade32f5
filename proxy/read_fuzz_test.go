package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/proxy"
)

type closingBuffer struct{ bytes.Buffer }

func (*closingBuffer) Close() error { return nil }

// relayed reports whether a proxy without handlers passes on a message of
// method as it is, to the other side: anything but what the proxy protocol
// itself gives a meaning to.
func relayed(method string) bool {
	_, mcp := wire.MCPMethod(method)
	return !wire.IsSuccessor(method) && !wire.IsInitialize(method) && wire.ProxyInitDialect(method) == nil &&
		method != wire.MethodCancelRequest && !mcp
}

// FuzzRead feeds a proxy with no handlers whatever its conductor may send.
// The proxy ends at the end of its input; everything it writes is one
// JSON-RPC message a line; each line that is not JSON gets a parse error;
// and what it relays, each way, is in the order it came and with its params
// byte for byte, and its members JSON-RPC does not define, which a wrapped
// message carries in its envelope's params (but for one named _meta there,
// the envelope's own).
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"a": [1, 2]}}` + "\n" +
		`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"x":"\u00e9"},"_meta":{}}}` + "\n" +
		"not json\n" + `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"_proxy/initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"x","params":null}` + "\r\n" + `[{"jsonrpc":"2.0","method":"y"}]` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"p" : 1}}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"params":{}}}` + "\n" + `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","x":[1],"_meta":{},"x\u0041":2}` + "\n" +
		`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"n","x":1,"_m\u0065ta":2,"id":3},"y":4}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out closingBuffer
		done := make(chan error, 1)
		go func() {
			done <- (&proxy.Proxy{MaxMessageBytes: 1 << 16}).Serve(context.Background(), bytes.NewReader(data), &out)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Serve did not end with its input %q", data)
		}

		// What a proxy without handlers must do with each line.
		type relay struct{ method, params, extra string }
		var parseErrors int
		var toSuccessor, toPredecessor []relay
		initialized := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(bytes.TrimLeft(line, " \t\r")) == 0 || wire.IsBatch(line) {
				continue
			}
			m, err := wire.Parse(line)
			if errors.Is(err, wire.ErrNotJSON) {
				parseErrors++
			}
			if err != nil || m.IsResponse() {
				continue
			}
			initialized = initialized || wire.IsInitialize(m.Method)
			if relayed(m.Method) {
				// An envelope's params null and none are the same (wire.Unwrap).
				params := string(m.Params)
				if params == "null" {
					params = ""
				}
				toSuccessor = append(toSuccessor, relay{m.Method, params, without(m.AppendExtra(nil), "_meta")})
			} else if wire.IsSuccessor(m.Method) {
				if method, inner, err := m.Unwrap(); err == nil && relayed(method) {
					toPredecessor = append(toPredecessor, relay{method, string(inner), string(m.AppendCarriedExtra(nil))})
				}
			}
		}

		var gotParseErrors int
		var gotToSuccessor, gotToPredecessor []relay
		lines := bytes.SplitAfter(out.Bytes(), []byte("\n"))
		if last := lines[len(lines)-1]; len(last) > 0 {
			t.Fatalf("the output ends in %q, not a whole line", last)
		}
		for _, line := range lines[:len(lines)-1] {
			m, err := wire.Parse(line[:len(line)-1])
			if err != nil {
				t.Fatalf("wrote %q: %v", line, err)
			}
			switch {
			case m.IsResponse():
				var e wire.Error
				if m.Error != nil && json.Unmarshal(m.Error, &e) == nil && e.Code == -32700 && string(m.ID) == "null" {
					gotParseErrors++
				}
			case wire.IsSuccessor(m.Method):
				method, inner, err := m.Unwrap()
				if err != nil {
					t.Fatalf("wrote an envelope that carries nothing: %s", line)
				}
				if relayed(method) {
					gotToSuccessor = append(gotToSuccessor, relay{method, string(inner), string(m.AppendCarriedExtra(nil))})
				}
			case relayed(m.Method):
				gotToPredecessor = append(gotToPredecessor, relay{m.Method, string(m.Params), string(m.AppendExtra(nil))})
			}
		}
		if gotParseErrors != parseErrors {
			t.Fatalf("%d parse errors for %d lines that are not JSON, in %q", gotParseErrors, parseErrors, data)
		}
		if initialized {
			return // an editor that started the proxy as its agent is refused from then on
		}
		if !slices.Equal(gotToSuccessor, toSuccessor) {
			t.Fatalf("relayed to the successor %q, want %q", gotToSuccessor, toSuccessor)
		}
		if !slices.Equal(gotToPredecessor, toPredecessor) {
			t.Fatalf("relayed to the predecessor %q, want %q", gotToPredecessor, toPredecessor)
		}
	})
}

// without returns extra, members as wire.Message.AppendExtra writes them,
// but for those whose name, decoded, is drop.
func without(extra []byte, drop string) string {
	var out []byte
	obj := append(append([]byte("{"), bytes.TrimPrefix(extra, []byte(","))...), '}')
	wire.EachField(obj, func(key, val []byte) {
		if name, _ := wire.Unquote(key); name != drop {
			out = append(append(append(append(out, ','), key...), ':'), val...)
		}
	})
	return string(out)
}
