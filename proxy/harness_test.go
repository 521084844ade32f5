package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/acp-conductor/acp-conductor/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// timeout bounds every wait in these tests; a proxy that is right answers in
// microseconds.
const timeout = 5 * time.Second

// A conductor plays the proxy's conductor by hand, over in-memory pipes.
type conductor struct {
	t      *testing.T
	in     *io.PipeWriter // the proxy's input
	lines  chan string    // the proxy's output, line by line
	done   chan error     // Serve's result
	cancel context.CancelFunc

	startReading func() // lets the conductor end read, if serveOS held it
}

// serve starts p on pipes and returns the conductor end. The test's cleanup
// closes the proxy's input and checks that Serve returns.
func serve(t *testing.T, p *proxy.Proxy) *conductor {
	t.Helper()
	outR, outW := io.Pipe()
	return serveOn(t, p, outR, outW, nil)
}

// serveOS is serve with the proxy writing to an operating-system pipe, as a
// proxy process given proxy.Stdout does: Serve writes there without a
// hand-off whenever it can. If held is set, the conductor end reads nothing
// until startReading is called, so that the pipe can fill up.
func serveOS(t *testing.T, p *proxy.Proxy, held bool) *conductor {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var start chan struct{}
	if held {
		start = make(chan struct{})
	}
	return serveOn(t, p, outR, outW, start)
}

func serveOn(t *testing.T, p *proxy.Proxy, outR io.ReadCloser, outW io.WriteCloser, start chan struct{}) *conductor {
	t.Helper()
	inR, inW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &conductor{
		t:      t,
		in:     inW,
		lines:  make(chan string, 10000),
		done:   make(chan error, 1),
		cancel: cancel,

		startReading: func() {},
	}
	if start != nil {
		c.startReading = sync.OnceFunc(func() { close(start) })
	}
	go func() { c.done <- p.Serve(ctx, inR, outW) }()
	go func() {
		defer close(c.lines)
		defer outR.Close()
		if start != nil {
			<-start
		}
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		c.startReading()
		c.in.Close()
		c.wait()
		cancel()
		for range c.lines {
		}
	})
	return c
}

// wait waits for Serve to return, once.
func (c *conductor) wait() error {
	c.t.Helper()
	select {
	case err, ok := <-c.done:
		if ok {
			close(c.done)
		}
		return err
	case <-time.After(timeout):
		c.t.Fatal("Serve did not return")
		return nil
	}
}

// send writes one line to the proxy.
func (c *conductor) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// recv returns the proxy's next line.
func (c *conductor) recv() string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("proxy closed its output")
		}
		return line
	case <-time.After(timeout):
		c.t.Fatal("proxy sent nothing")
		return ""
	}
}

// expect checks that the proxy's next line is exactly want.
func (c *conductor) expect(want string) {
	c.t.Helper()
	if got := c.recv(); got != want {
		c.t.Fatalf("proxy sent\n\t%s\nwant\n\t%s", got, want)
	}
}

// quiet checks that the proxy has sent nothing more once it has done all
// it can with what it read. It runs in a synctest bubble, where
// synctest.Wait says when that is.
func (c *conductor) quiet() {
	c.t.Helper()
	synctest.Wait()
	select {
	case line := <-c.lines:
		c.t.Fatalf("proxy sent unexpected %s", line)
	default:
	}
}

// expectError checks that the proxy's next line is an error response to id
// with the given code.
func (c *conductor) expectError(id string, code int) {
	c.t.Helper()
	line := c.recv()
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil || resp.Error == nil || string(resp.ID) != id || resp.Error.Code != code {
		c.t.Fatalf("proxy sent\n\t%s\nwant an error %d for id %s", line, code, id)
	}
}
