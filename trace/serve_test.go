package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

func startServer(t *testing.T) (*Server, *Recorder) {
	t.Helper()
	hub := NewHub(0)
	srv, err := Serve("127.0.0.1:0", hub, "live", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(nil, Options{Live: hub})
	t.Cleanup(func() { rec.Close(); srv.Close() })
	return srv, rec
}

// TestServeGuards: only the URL with the token serves, only to a request
// that names a loopback host, and only a loopback address is served at all.
func TestServeGuards(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0"} {
		if _, err := Serve(addr, NewHub(0), "", nil); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Serve(%q) = %v, want a refusal", addr, err)
		}
	}
	srv, _ := startServer(t)
	base := strings.TrimSuffix(srv.URL(), "/")
	root := base[:strings.LastIndex(base, "/")]
	for _, tc := range []struct {
		url, host string
		want      int
	}{
		{srv.URL(), "", http.StatusOK},
		{root + "/", "", http.StatusNotFound},
		{root + "/" + strings.Repeat("0", 32) + "/", "", http.StatusNotFound},
		{srv.URL() + "other", "", http.StatusNotFound},
		{srv.URL(), "evil.example:80", http.StatusForbidden},
		{srv.URL(), "localhost", http.StatusOK},
		// Without its slash the page would find no live stream.
		{base, "", http.StatusMovedPermanently},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (Host %q): %d, want %d", tc.url, tc.host, resp.StatusCode, tc.want)
		}
		if loc := resp.Header.Get("Location"); tc.want == http.StatusMovedPermanently && !strings.HasSuffix(srv.URL(), loc) {
			t.Errorf("GET %s: redirected to %q, want the page's own URL", tc.url, loc)
		}
	}
}

// TestServeOrigin: a request from a page elsewhere, even one that holds
// the URL, is refused, on the page and on its stream alike; the viewer's
// own origin, or none, is served.
func TestServeOrigin(t *testing.T) {
	srv, _ := startServer(t)
	u, _ := url.Parse(srv.URL())
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://" + u.Host, http.StatusOK},
		{"http://localhost:" + u.Port(), http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"https://127.0.0.1.evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		for _, path := range []string{"", "events?from=0"} {
			c, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			origin := ""
			if tc.origin != "" {
				origin = "Origin: " + tc.origin + "\r\n"
			}
			fmt.Fprintf(c, "GET %s%s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", u.Path, path, u.Host, origin)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s%s (Origin %q): %d, want %d", u.Path, path, tc.origin, resp.StatusCode, tc.want)
			}
		}
	}
}

// TestServeStreams: the page carries the events so far and names the
// stream of those after; the stream delivers each new event as it is
// recorded.
func TestServeStreams(t *testing.T) {
	srv, rec := startServer(t)
	rec.Send("client", "agent", json.RawMessage("1"), "initialize", json.RawMessage(`{}`), false)
	waitHub(t, srv.hub, 1)

	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `"method":"initialize"`) || !strings.Contains(string(page), `"events?from=1"`) {
		t.Fatalf("the page lacks the first event or the stream's URL:\n%.2000s", page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}

	resp, err = http.Get(srv.URL() + "events?from=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	for i, method := range []string{"session/new", "session/prompt"} {
		rec.Send("client", "agent", json.RawMessage("2"), method, json.RawMessage(`{}`), false)
		var id, data string
		for lines.Scan() && lines.Text() != "" {
			k, v, _ := strings.Cut(lines.Text(), ": ")
			switch k {
			case "id":
				id = v
			case "data":
				data = v
			}
		}
		var e Event
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.Method != method {
			t.Fatalf("event %d: got %q (%v), want %s", i, data, err, method)
		}
		if want := []string{"1", "2"}[i]; id != want {
			t.Errorf("event %d has id %s, want %s", i, id, want)
		}
	}
}

// TestServeIdleKeepAlive: a connection kept alive with no request in
// progress is closed once the idle timeout has passed, while a live stream
// opened before it goes on delivering events.
func TestServeIdleKeepAlive(t *testing.T) {
	defer func(d time.Duration) { idleTimeout = d }(idleTimeout)
	idleTimeout = 500 * time.Millisecond
	srv, rec := startServer(t)

	resp, err := http.Get(srv.URL() + "events?from=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	u, _ := url.Parse(srv.URL())
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Path, u.Host)
	page, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, page.Body)
	page.Body.Close()
	if page.Close {
		t.Fatal("the server closed the connection with its answer, not for being idle")
	}
	// Nothing more comes; then the server's end of the connection.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("a connection idle for 20 s, the idle timeout %v, is still open: %v", idleTimeout, err)
	}

	rec.Send("client", "agent", json.RawMessage("1"), "initialize", json.RawMessage(`{}`), false)
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data: ") {
			if !strings.Contains(lines.Text(), `"initialize"`) {
				t.Fatalf("the stream delivered %s", lines.Text())
			}
			return
		}
	}
	t.Fatalf("the live stream, open longer than the idle timeout, ended: %v", lines.Err())
}

// waitHub waits until hub holds n events, as a subscriber sees them.
func waitHub(t *testing.T, hub *Hub, n int) {
	t.Helper()
	events, _, stop := hub.Subscribe(0, n)
	defer stop()
	bound := time.After(10 * time.Second)
	for range n {
		select {
		case _, ok := <-events:
			if !ok {
				t.Fatal("the hub closed")
			}
		case <-bound:
			t.Fatalf("the hub never got %d events", n)
		}
	}
}

// TestServePagesHoldNoCopy: the live page holds the history, up to 64
// MiB; viewers that load it at once (tabs, reloads) must not each hold a
// copy of it while their page is written. Eight pages, each read only as
// far as its first bytes, leave the heap within the history's size of
// what it was.
func TestServePagesHoldNoCopy(t *testing.T) {
	const bound = 4 << 20
	hub := NewHub(bound)
	srv, err := Serve("127.0.0.1:0", hub, "live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	line := []byte(`{"type":"notification","ts":1,"from":"agent","to":"client","method":"session/update","params":{"text":"` +
		strings.Repeat("<x>", 1300) + `"},"bytes":3913}`)
	for range 2 * bound / len(line) {
		hub.publish(line)
	}
	u, _ := url.Parse(srv.URL())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var conns []net.Conn
	for range 8 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Path, u.Host)
		// The first bytes: the page is being written, and what it is
		// written from is in the heap.
		if _, err := io.ReadFull(c, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("8 pages being written hold %d bytes of heap; the history, %d", grown, bound)
	if grown > bound {
		t.Errorf("8 pages being written hold %d bytes of heap, more than the whole history (%d)", grown, bound)
	}
	runtime.KeepAlive(conns)
}
