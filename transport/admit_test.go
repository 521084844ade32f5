package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// serveGuarded serves s behind a Guard for token as serve does (HTTP/1.1
// and h2c, connections admitted within admit) and returns its address.
func serveGuarded(t *testing.T, s *Server, token string, admit time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		Handler:           (&Guard{Token: token, Loopback: true}).Wrap(s),
		ReadHeaderTimeout: admit,
		ConnContext:       ConnContext,
		Protocols:         new(http.Protocols),
	}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(AdmitListener(ln, admit)) }()
	t.Cleanup(func() { hs.Close(); <-done; s.Close() })
	return ln.Addr().String()
}

// h2Preface is the HTTP/2 client preface and an empty SETTINGS frame.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// TestAdmitClosesUnauthorised: a connection that carries no authorised
// request goes away within the admission time, HTTP/2 (preface only) as
// HTTP/1 (headers never completed, or only refused requests); one that
// carries an authorised request stays.
func TestAdmitClosesUnauthorised(t *testing.T) {
	addr := serveGuarded(t, &Server{Serve: echo(make(chan error, 1))}, "tok", 300*time.Millisecond)
	for _, tc := range []struct {
		name string
		send func(c net.Conn) error
		open bool // the server keeps the connection
	}{
		{"h2c preface", func(c net.Conn) error { _, err := io.WriteString(c, h2Preface); return err }, false},
		{"HTTP/1 headers unfinished", func(c net.Conn) error { _, err := io.WriteString(c, "GET /acp HTTP/1.1\r\n"); return err }, false},
		{"HTTP/1 authorised", func(c net.Conn) error {
			fmt.Fprintf(c, "PUT /acp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok\r\n\r\n", addr)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := tc.send(c); err != nil {
				t.Fatal(err)
			}
			// Whatever the server sends (h2's SETTINGS), then its end.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			switch {
			case tc.open && !timedOut:
				t.Errorf("an admitted connection was closed: %v", err)
			case !tc.open && err != nil:
				t.Errorf("a connection with no authorised request still open 2s later, the admission time 300ms: %v", err)
			}
		})
	}
}

// TestLimitListener: beyond its bound, a connection is not served until
// one that was is closed.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(LimitListener(ln, 2)) }()
	defer func() { hs.Close(); <-done }()

	// ask sends a request on c and reports whether its answer came
	// within d.
	ask := func(c net.Conn, d time.Duration) error {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(d))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	var conns []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		if i < 2 {
			if err := ask(c, 5*time.Second); err != nil {
				t.Fatalf("connection %d, within the bound: %v", i, err)
			}
		}
	}
	if err := ask(conns[2], 300*time.Millisecond); err == nil {
		t.Fatal("a third connection was served, the bound 2")
	}
	conns[0].Close()
	// Its request is still waiting; the answer comes once served.
	conns[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(conns[2]), nil); err != nil {
		t.Fatalf("the third connection once the first closed: %v", err)
	} else {
		resp.Body.Close()
	}
}

// TestAdmitKeepsAuthorisedH2C: an h2c connection that carried an
// authorised request is kept past the admission time: Guard finds it
// through ConnContext, HTTP/2 requests too.
func TestAdmitKeepsAuthorisedH2C(t *testing.T) {
	addr := serveGuarded(t, &Server{Serve: echo(make(chan error, 1))}, "tok", 200*time.Millisecond)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	reused := func() bool {
		var got bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "PUT", "http://"+addr+"/acp", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("answered over %s", resp.Proto)
		}
		return got
	}
	reused()
	time.Sleep(600 * time.Millisecond) // three admission times
	if !reused() {
		t.Error("an h2c connection that carried an authorised request was closed")
	}
}
