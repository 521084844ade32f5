package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// FuzzRouteServer: each server id short enough to have a route has
// exactly one, and a path is taken for a route only if it is that one.
func FuzzRouteServer(f *testing.F) {
	for _, s := range []string{"/mcp/c3J2LTE", "/mcp/", "/mcp/c3J2LTE=", "/mcp/c3J2LTE/", "/", "/mcp/%2F", "/mcp/_-_-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if id, ok := routeServer(path); ok && serverRoute(id) != path {
			t.Errorf("path %q is taken for server %q, whose route is %q", path, id, serverRoute(id))
		}
		if id, ok := routeServer(serverRoute(path)); ok != routable(path) || ok && id != path {
			t.Errorf("the route of %q (routable: %v) names %q, %v", path, routable(path), id, ok)
		}
	})
}

// FuzzReadHello: whatever a peer sends, the bridge reads at most
// maxHelloBytes of it, and takes a hello only from one whole line with
// nothing after it.
func FuzzReadHello(f *testing.F) {
	f.Add([]byte(`{"mcpShim":1,"token":"00"}`+"\n"), 1)
	f.Add([]byte("x\ny\n"), 3)
	f.Add(bytes.Repeat([]byte("a"), maxHelloBytes+10), 100)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		r := &countingReader{r: bytes.NewReader(data)}
		var in io.Reader = r
		if chunk%2 != 0 { // a peer that sends a byte at a time
			in = iotest.OneByteReader(r)
		}
		line, err := readHello(in)
		if r.n > maxHelloBytes {
			t.Errorf("read %d bytes, more than %d", r.n, maxHelloBytes)
		}
		if err == nil {
			if i := bytes.IndexByte(data, '\n'); i < 0 || !bytes.Equal(line, data[:i]) || r.n != i+1 {
				t.Errorf("took %q from %q", line, data)
			}
		}
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzBearer: a token is taken only from "Bearer <token>", whatever the
// scheme's case, and is exactly what follows the one space.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer abc", "Bearer  abc", "Bearer", "Basic abc", "Bearer a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		token, ok := bearer(h)
		if ok && (!strings.EqualFold(h[:7], "Bearer ") || h[7:] != token || token == "" || strings.ContainsAny(token, " \t")) {
			t.Errorf("bearer(%q) = %q", h, token)
		}
	})
}

// FuzzParsePost holds the check of a POST body to what it promises: a body
// is taken if and only if it is one JSON-RPC message or a non-empty batch
// of them, whose requests have distinct ids that are not null, with no
// initialize in a batch; what is taken is the same JSON on one line, with
// every request's id; and a refusal maps to the JSON-RPC error it is.
func FuzzParsePost(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},\n {\"jsonrpc\":\"2.0\",\"method\":\"b\"}]",
		`[{"jsonrpc":"2.0","id":"a","method":"x"},{"jsonrpc":"2.0","id":"\u0061","method":"y"}]`,
		`[]`, `[1]`, `{"jsonrpc":"2.0","id":null,"method":"x"}`, ` {"jsonrpc":"2.0","id":1,"result":{}} `,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parsePost(body)
		// The reference: encoding/json's reading, and wire.Parse's of each
		// message.
		ok, ids, init := true, map[string]json.RawMessage{}, false
		var elems []json.RawMessage
		trimmed := bytes.TrimSpace(body)
		switch {
		case !json.Valid(trimmed):
			ok = false
		case trimmed[0] == '[':
			json.Unmarshal(trimmed, &elems)
			ok = len(elems) > 0
		default:
			elems = []json.RawMessage{trimmed}
		}
		for _, e := range elems {
			m, perr := wire.Parse(e)
			if perr != nil {
				ok = false
				break
			}
			if !m.IsRequest() {
				continue
			}
			var key any
			if json.Unmarshal(m.ID, &key) != nil || key == nil {
				ok = false
				break
			}
			k := fmt.Sprintf("%T %s", key, m.ID)
			if s, isString := key.(string); isString {
				k = "s " + s
			}
			if _, dup := ids[k]; dup {
				ok = false
				break
			}
			ids[k] = m.ID
			init = init || m.Method == "initialize"
		}
		if ok && init && len(trimmed) > 0 && trimmed[0] == '[' {
			ok = false
		}
		if err != nil {
			if ok {
				t.Fatalf("parsePost(%q) refused a valid POST: %v", body, err)
			}
			if !errors.Is(err, wire.ErrNotJSON) && !errors.Is(err, wire.ErrNotJSONRPC) {
				t.Fatalf("parsePost(%q): %v is neither a parse error nor an invalid request", body, err)
			}
			return
		}
		if !ok {
			t.Fatalf("parsePost(%q) took what the reference refuses", body)
		}
		if bytes.ContainsAny(p.msg, "\r\n") {
			t.Fatalf("parsePost(%q) = %q, more than a line", body, p.msg)
		}
		var want bytes.Buffer
		json.Compact(&want, trimmed)
		var got bytes.Buffer
		json.Compact(&got, p.msg)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("parsePost(%q) = %q, other JSON", body, p.msg)
		}
		if p.batch != (trimmed[0] == '[') || p.init != init || len(p.requests) != len(ids) {
			t.Fatalf("parsePost(%q) = batch %v, init %v, %d requests; want %v, %v, %d", body, p.batch, p.init, len(p.requests), trimmed[0] == '[', init, len(ids))
		}
	})
}

// FuzzShimRelay: whatever an agent writes to the shim, the bridge's Conn
// receives each line within the limit that is not blank, byte for byte and
// in order, and an oversize one as an OversizeError.
func FuzzShimRelay(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n  \r\nx\r\n"))
	f.Add([]byte(strings.Repeat("y", 100) + "\nz"))
	f.Add([]byte("\xff\x00\r\r\n"))
	const limit = 64
	accept, conns := parked()
	b, err := New(Options{MaxMessageBytes: limit})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx, accept) }()
	f.Cleanup(func() {
		cancel()
		<-served
		b.Close()
	})
	e := env(b.Stdio("srv", "tools"))
	f.Fuzz(func(t *testing.T, data []byte) {
		shimDone := make(chan error, 1)
		go func() { shimDone <- RunShim(ctx, bytes.NewReader(data), io.Discard, e[EnvSocket], e[EnvToken]) }()
		c := next(t, conns)
		var got [][]byte
		oversize := 0
		for {
			msg, err := recv(t, c)
			if big, ok := errors.AsType[*wire.OversizeError](err); ok && big != nil {
				oversize++
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			got = append(got, msg)
		}
		c.Close()
		if err := <-shimDone; err != nil {
			t.Fatalf("RunShim: %v", err)
		}
		var want [][]byte
		wantOversize := 0
		for _, l := range bytes.Split(data, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			switch {
			case len(bytes.TrimLeft(l, " \t\r")) == 0:
			case len(l) > limit:
				wantOversize++
			default:
				want = append(want, l)
			}
		}
		if len(got) != len(want) || oversize != wantOversize {
			t.Fatalf("sent %q: received %q and %d oversize, want %q and %d", data, got, oversize, want, wantOversize)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("sent %q: message %d is %q, want %q", data, i, got[i], want[i])
			}
		}
	})
}

// FuzzDirName: a directory name the sweep reads as a bridge's is one
// socketDir makes, the pid and start time spelt as strconv spells them,
// and every name socketDir makes reads back as its pid and start time.
func FuzzDirName(f *testing.F) {
	f.Add("acp-conductor-mcp-1234-5678-0412", 1234, uint64(5678), "0412")
	f.Add("acp-conductor-mcp-+5-1-2", 5, uint64(1), "2")
	f.Add("acp-conductor-mcp-05-01-", 5, uint64(0), "")
	f.Fuzz(func(t *testing.T, name string, pid int, start uint64, suffix string) {
		// The sweep reads only names with the prefix.
		if p, s, ok := parseDirName(name); ok && strings.HasPrefix(name, dirPrefix) {
			head := dirPrefix + strconv.Itoa(p) + "-" + strconv.FormatUint(s, 10) + "-"
			if !strings.HasPrefix(name, head) || strings.Contains(name[len(head):], "-") {
				t.Fatalf("parseDirName(%q) = %d, %d: no name socketDir makes", name, p, s)
			}
		}
		if pid <= 0 || strings.Contains(suffix, "-") {
			return
		}
		made := fmt.Sprintf("%s%d-%d-", dirPrefix, pid, start) + suffix
		if p, s, ok := parseDirName(made); !ok || p != pid || s != start {
			t.Fatalf("parseDirName(%q) = %d, %d, %v", made, p, s, ok)
		}
	})
}
