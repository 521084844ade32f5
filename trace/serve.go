package trace

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// CheckLoopback reports whether addr (host:port) names a loopback
// address: the live viewer shows every message of the chain, so only this
// machine may reach it.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid address %q: want host:port, such as 127.0.0.1:0", addr)
	}
	if !loopbackHost(host) {
		return fmt.Errorf("address %q is not loopback: the trace viewer serves only this machine (use 127.0.0.1, [::1] or localhost)", addr)
	}
	return nil
}

// loopbackOrigin reports whether origin is an http origin on a loopback
// host; "null", sent by sandboxed and file: pages, is not.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Host != "" && loopbackHost(u.Hostname())
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// idleTimeout closes a connection kept alive with no request in progress,
// which a browser tab left open would otherwise hold for ever; it is longer
// than the 90 s browsers and Go's client keep an idle connection, so that
// they usually close first. A variable, for tests.
var idleTimeout = 2 * time.Minute

// A Server serves the live viewer of one Hub over HTTP on loopback, under
// a path that holds a random token: other users of the machine can reach
// the port but not the traffic.
type Server struct {
	srv   *http.Server
	hub   *Hub
	url   string
	token string
	done  chan struct{}
	err   error
}

// Serve starts serving hub's live viewer on addr, which must be loopback.
// The viewer's URL, token included, is URL(); Close stops the server.
func Serve(addr string, hub *Hub, title string, log *zap.Logger) (*Server, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("trace: viewer: %w", err)
	}
	var raw [16]byte
	rand.Read(raw[:])
	s := &Server{hub: hub, token: hex.EncodeToString(raw[:]), done: make(chan struct{})}
	s.url = "http://" + ln.Addr().String() + "/" + s.token + "/"
	s.srv = &http.Server{
		Handler:           s.handler(title),
		ReadHeaderTimeout: 10 * time.Second,
		// Between requests only: a live stream is a request in progress.
		IdleTimeout: idleTimeout,
		ErrorLog:    zap.NewStdLog(log),
	}
	go func() { // owned: Close waits for done
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// URL returns the address of the viewer page, with its token.
func (s *Server) URL() string { return s.url }

// Close stops the server and ends the live streams.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.hub.Close() // ends the streams, so that Shutdown need not wait for them
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
	return s.err
}

// handler serves GET /TOKEN/ (the page, with the events so far) and GET
// /TOKEN/events?from=N (server-sent events from sequence number N on). The
// Host header and any Origin must name a loopback host, so that a web page
// elsewhere cannot reach the viewer through DNS rebinding.
func (s *Server) handler(title string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !loopbackHost(strings.Trim(host, "[]")) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
			// A page elsewhere that learnt the URL must not read the
			// stream; the viewer's own requests send none, or its own.
			http.Error(w, "forbidden origin", http.StatusForbidden)
			return
		}
		token, rest, slash := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
			http.NotFound(w, r)
			return
		}
		if !slash {
			// The page finds its live stream relative to itself.
			http.Redirect(w, r, "/"+token+"/", http.StatusMovedPermanently)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		switch rest {
		case "":
			events, next := s.hub.Snapshot()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Security-Policy", csp(true))
			View(w, events, ViewOptions{Title: title, Live: "events?from=" + strconv.Itoa(next)})
		case "events":
			s.stream(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// stream sends events to one live viewer until it goes away, the hub
// closes, or it falls too far behind (it then reconnects, and catches up
// from the last event it got).
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("from"))
	if id, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil {
		from = id + 1
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	events, seq, stop := s.hub.Subscribe(from, 4096)
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case line, ok := <-events:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, line); err != nil {
				return
			}
			seq++
			for more := true; more; { // send what is queued in one write
				select {
				case line, ok := <-events:
					if !ok {
						fl.Flush()
						return
					}
					fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, line)
					seq++
				default:
					more = false
				}
			}
			fl.Flush()
		}
	}
}
