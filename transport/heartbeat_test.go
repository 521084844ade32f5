package transport

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/blackhole"
)

// echo serves a Conn by sending back what it reads, and reports the error
// its Read ended with.
func echo(ended chan<- error) func(context.Context, Conn, ConnInfo) {
	return func(ctx context.Context, c Conn, _ ConnInfo) {
		for {
			msg, err := c.Read(ctx)
			if err != nil {
				ended <- err
				return
			}
			if err := c.Write(ctx, msg); err != nil {
				ended <- err
				return
			}
		}
	}
}

// heartbeatPair serves echo behind a blackhole relay and dials it through
// the relay, both ends pinging every interval with the given timeout.
func heartbeatPair(t *testing.T, interval, timeout time.Duration, serverPong, clientPong func()) (*Server, *observer.ObservedLogs, *blackhole.Relay, Conn, <-chan error) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	ended := make(chan error, 1)
	s := &Server{Serve: echo(ended), PingInterval: interval, pingTimeout: timeout, pong: serverPong, Logger: zap.New(core)}
	ts := httptest.NewServer(s)
	relay, err := blackhole.Listen(strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := Dial(ctx, "ws://"+relay.Addr()+"/acp", DialOptions{PingInterval: interval, pingTimeout: timeout, pong: clientPong})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); relay.Close(); s.Close(); ts.Close() })
	roundTrip(t, c, `{"jsonrpc":"2.0","method":"hello"}`)
	return s, logs, relay, c, ended
}

func roundTrip(t *testing.T, c Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Write(ctx, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Read(ctx)
	if err != nil || string(got) != msg {
		t.Fatalf("echo: %q, %v; want %q", got, err, msg)
	}
}

// TestHeartbeatLostNetwork: once the network between the two ends is lost
// (nothing forwarded, neither socket closed), each end's heartbeat closes
// its side: the server's connection ends and its log says why, and the
// client's Read fails naming the heartbeat.
func TestHeartbeatLostNetwork(t *testing.T) {
	const interval = 100 * time.Millisecond
	s, logs, relay, c, ended := heartbeatPair(t, interval, 0, nil, nil)
	relay.Blackhole()

	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		readErr <- err
	}()
	fail := time.After(30 * time.Second) // a bound on a hang, not a timing assert
	select {
	case err := <-readErr:
		if !errors.Is(err, ErrHeartbeat) || !strings.Contains(err.Error(), "heartbeat") {
			t.Errorf("client Read: %v, want ErrHeartbeat", err)
		}
	case <-fail:
		t.Fatal("the client's Read did not fail after the network was lost")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, ErrHeartbeat) {
			t.Errorf("server Read: %v, want ErrHeartbeat", err)
		}
	case <-fail:
		t.Fatal("the server's connection did not end after the network was lost")
	}
	waitIdle(t, s)
	lost := logs.FilterMessage("connection ended: heartbeat lost").All()
	if len(lost) != 1 {
		t.Fatalf("server log: %v, want one \"connection ended: heartbeat lost\"", logs.All())
	}
	f := lost[0].ContextMap()
	if f["connection"] == "" || !strings.Contains(f["error"].(string), "heartbeat") {
		t.Errorf("log fields %v: want the connection and the heartbeat", f)
	}
}

// TestHeartbeatKeepsLiveConnection: while the network forwards, pongs come
// and the connection stays up across many intervals, even with nothing else
// sent.
func TestHeartbeatKeepsLiveConnection(t *testing.T) {
	const want = 5
	var serverPongs, clientPongs atomic.Int32
	both := make(chan struct{})
	check := func() {
		if serverPongs.Load() >= want && clientPongs.Load() >= want {
			select {
			case <-both:
			default:
				close(both)
			}
		}
	}
	// A short interval and a long timeout: a slow pong on a loaded machine
	// is not what this test is about.
	_, logs, relay, c, ended := heartbeatPair(t, 20*time.Millisecond, time.Minute,
		func() { serverPongs.Add(1); check() }, func() { clientPongs.Add(1); check() })
	reading := make(chan error, 1)
	go func() { // the client's reader, which reads its pongs
		_, err := c.Read(context.Background())
		reading <- err
	}()
	select {
	case <-both:
	case err := <-reading:
		t.Fatalf("client Read: %v before %d pongs", err, want)
	case err := <-ended:
		t.Fatalf("server Read: %v before %d pongs", err, want)
	case <-time.After(30 * time.Second):
		t.Fatalf("pongs: server %d, client %d; want %d each", serverPongs.Load(), clientPongs.Load(), want)
	}
	if relay.Forwarded() == 0 {
		t.Error("nothing went through the relay")
	}
	if n := len(logs.FilterMessage("connection ended: heartbeat lost").All()); n != 0 {
		t.Errorf("%d connections lost their heartbeat", n)
	}
	// The pending Read still gets the next message.
	if err := c.Write(context.Background(), []byte(`{"jsonrpc":"2.0","method":"still"}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-reading; err != nil {
		t.Fatalf("client Read after %d pongs: %v", want, err)
	}
}

func TestPingInterval(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: DefaultPingInterval, -1: 0, time.Second: time.Second} {
		if got := pingInterval(in); got != want {
			t.Errorf("pingInterval(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestHeartbeatStalledReader: an end that is not reading (its reader held
// back by flow control) cannot see its pongs; its late pings prove nothing,
// so it keeps the connection, which works once it reads again. The server
// does not ping here: a client that is not reading cannot answer it.
func TestHeartbeatStalledReader(t *testing.T) {
	ended := make(chan error, 1)
	s := &Server{Serve: echo(ended), PingInterval: -1}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	var unsure atomic.Int32
	three := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/acp", DialOptions{PingInterval: 20 * time.Millisecond,
		unsure: func() {
			if unsure.Add(1) == 3 {
				close(three)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// No Read yet: three pings go unanswered as far as the client can see.
	select {
	case <-three:
	case <-ctx.Done():
		t.Fatalf("%d late pings seen without a Read, want 3", unsure.Load())
	}
	roundTrip(t, c, `{"jsonrpc":"2.0","method":"after the stall"}`)
}
