package mcpbridge

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
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
