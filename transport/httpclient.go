package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// httpClient is the client side of a Streamable HTTP connection: each
// message written is POSTed, and what the server sends arrives on the
// connection's SSE stream and one per session, opened as sessions appear.
type httpClient struct {
	url   string
	hc    *http.Client
	hdr   http.Header
	limit int
	log   *zap.Logger

	ctx    context.Context // ends the streams
	cancel context.CancelFunc
	in     chan []byte
	wg     sync.WaitGroup // the stream readers

	failOnce sync.Once
	failed   chan struct{} // closed when the connection is lost or closed
	err      error         // why; valid once failed is closed

	wmu     sync.Mutex // serializes writes, in order
	connID  string
	version string // the negotiated protocolVersion, sent as Acp-Protocol-Version; set with connID

	mu          sync.Mutex
	sessions    map[string]bool   // sessions whose stream is open
	respSession map[string]string // server request id -> the session stream it came on
	closing     map[string]string // request id -> the session its session/close (or delete) ends
}

func newHTTPClient(u string, opts DialOptions) *httpClient {
	ctx, cancel := context.WithCancel(context.Background())
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &httpClient{
		url: u, hc: opts.HTTPClient, hdr: opts.Header, limit: opts.MaxMessageBytes, log: log,
		ctx: ctx, cancel: cancel,
		in:          make(chan []byte, 64),
		failed:      make(chan struct{}),
		sessions:    make(map[string]bool),
		respSession: make(map[string]string),
		closing:     make(map[string]string),
	}
}

// fail ends the connection with err, the first cause kept.
func (c *httpClient) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.failed)
		c.cancel()
	})
}

func (c *httpClient) Read(ctx context.Context) ([]byte, error) {
	select {
	case msg := <-c.in:
		return msg, nil
	default:
	}
	select {
	case msg := <-c.in:
		return msg, nil
	case <-c.failed:
		return nil, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliver hands a message from the server to Read.
func (c *httpClient) deliver(msg []byte) bool {
	select {
	case c.in <- msg:
		return true
	case <-c.failed:
		return false
	}
}

func (c *httpClient) request(ctx context.Context, method string, body []byte, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.setHeaders(req, h)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	return resp, hideQuery(err)
}

// setHeaders gives req the dial's headers, then h, then the negotiated
// protocol version once there is one.
func (c *httpClient) setHeaders(req *http.Request, h http.Header) {
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.version != "" {
		req.Header.Set(HeaderProtocolVersion, c.version)
	}
}

// statusError describes a refused request with the start of its body,
// without the dial's header values: an error page (a proxy's, say) may
// echo the Authorization it was sent, and this error is logged and may
// reach the editor.
func (c *httpClient) statusError(what string, resp *http.Response) error {
	return fmt.Errorf("%s: %s: %s", what, resp.Status, strings.TrimSpace(readRedacted(resp.Body, 512, c.hdr)))
}

func (c *httpClient) Write(ctx context.Context, msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.failed:
		return c.err
	default:
	}
	m, err := wire.Parse(msg)
	if err != nil {
		return fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	if c.connID == "" {
		return c.initialize(ctx, m)
	}
	h := http.Header{HeaderConnectionID: {c.connID}}
	session := sessionOf(m.Params)
	if m.IsResponse() {
		c.mu.Lock()
		session = c.respSession[idKey(m.ID)]
		delete(c.respSession, idKey(m.ID))
		c.mu.Unlock()
	}
	if session != "" {
		h.Set(HeaderSessionID, session)
		if err := c.openSession(ctx, session); err != nil {
			return err
		}
		if m.IsRequest() && sessionEnds[m.Method] {
			c.mu.Lock()
			c.closing[idKey(m.ID)] = session
			c.mu.Unlock()
		}
	}
	resp, err := c.request(ctx, http.MethodPost, msg, h)
	if err != nil {
		c.fail(fmt.Errorf("POST: %w", err))
		return c.err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	err = c.statusError("POST "+m.Method, resp)
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		c.fail(err) // the connection is unusable or gone
		return err
	}
	if m.IsRequest() {
		c.mu.Lock()
		delete(c.closing, idKey(m.ID)) // if it was a close, it closed nothing
		c.mu.Unlock()
		// Only this request failed: answer it, as the server would have.
		e := wire.Errorf(-32603, "%v", err).WithData(map[string]any{"status": resp.StatusCode})
		c.deliver(wire.ErrorResponse(m.ID, e).Bytes())
		return nil
	}
	return err
}

// initialize POSTs the first message, which must be initialize, takes the
// connection id from the answer and opens the connection's stream.
func (c *httpClient) initialize(ctx context.Context, m *wire.Message) error {
	if !wire.IsInitialize(m.Method) || m.ID == nil {
		return errors.New("the first message over Streamable HTTP must be initialize")
	}
	resp, err := c.request(ctx, http.MethodPost, m.Raw, nil)
	if err != nil {
		c.fail(fmt.Errorf("initialize: %w", err))
		return c.err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			u, _ := url.Parse(c.url) // it is a URL's String
			c.fail(fmt.Errorf("initialize: %w", refusal(u, resp, c.hdr)))
		} else {
			c.fail(c.statusError("initialize", resp))
		}
		return c.err
	}
	id := resp.Header.Get(HeaderConnectionID)
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.limit)))
	if err != nil || id == "" {
		c.fail(fmt.Errorf("initialize: no %s or no body (%v)", HeaderConnectionID, err))
		return c.err
	}
	c.connID = id
	if m, err := wire.Parse(compact(body)); err == nil {
		c.version = protocolVersionOf(m.Result)
	}
	if err := c.openStream(ctx, ""); err != nil {
		c.fail(err)
		return err
	}
	c.deliver(compact(body))
	return nil
}

// openSession opens a session's stream if it is not open.
func (c *httpClient) openSession(ctx context.Context, session string) error {
	c.mu.Lock()
	open := c.sessions[session]
	c.sessions[session] = true
	c.mu.Unlock()
	if open {
		return nil
	}
	return c.openStream(ctx, session)
}

// openStream GETs the connection's stream (session "") or a session's, and
// reads it on its own goroutine once the server has accepted it.
func (c *httpClient) openStream(ctx context.Context, session string) error {
	h := http.Header{HeaderConnectionID: {c.connID}, "Accept": {"text/event-stream"}}
	if session != "" {
		h.Set(HeaderSessionID, session)
	}
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	c.setHeaders(req, h)
	got := make(chan streamOpened, 1)
	go func() { resp, err := c.hc.Do(req); got <- streamOpened{resp, hideQuery(err)} }()
	select {
	case r := <-got:
		return c.readOpened(r, session)
	case <-ctx.Done():
		// The GET goes on under c.ctx, and what it opens is read as if
		// waited for: else the server, which takes the stream for read,
		// would send the session's messages where nobody reads them, the
		// session marked open here.
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.readOpened(<-got, session)
		}()
		return ctx.Err()
	}
}

// A streamOpened is the outcome of the GET that opens a stream.
type streamOpened struct {
	resp *http.Response
	err  error
}

// readOpened reads the stream r opened, on its own goroutine, or returns
// why it did not open.
func (c *httpClient) readOpened(r streamOpened, session string) error {
	if r.err != nil {
		c.forgetSession(session) // the next message for it tries again
		return fmt.Errorf("opening a stream: %w", r.err)
	}
	if r.resp.StatusCode != http.StatusOK {
		defer r.resp.Body.Close()
		err := c.statusError("opening a stream", r.resp)
		if session == "" {
			c.fail(err)
		}
		c.forgetSession(session)
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer r.resp.Body.Close()
		err := c.readStream(r.resp.Body, session)
		select {
		case <-c.failed:
			return
		default:
		}
		if session == "" {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("the connection's stream ended: %w", err))
			return
		}
		c.forgetSession(session) // the next message for it reopens it
	}()
	return nil
}

func (c *httpClient) forgetSession(session string) {
	c.mu.Lock()
	delete(c.sessions, session)
	c.mu.Unlock()
}

// readStream delivers the data of each SSE event of type "message" as a
// message: as in MCP's Streamable HTTP, which ACP's follows, only those
// carry JSON-RPC, and an event that names no type is one. Any other type
// is the server's own business (a ping, an endpoint), and is skipped.
func (c *httpClient) readStream(body io.Reader, session string) error {
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), c.limit+16)
	lines.Split(sseLine)
	var data []byte
	var event []byte // the event's type, as its last "event" line gave it
	for first := true; lines.Scan(); first = false {
		line := lines.Bytes()
		if first {
			// The spec has a client drop a byte order mark that starts
			// the stream; the first event would be lost with it.
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		switch {
		case len(line) == 0:
			// The event's data is its data lines', each ended by a line
			// feed but the last, as the spec joins them; blank, it
			// carries no message. Its type ends with it, dispatched or not.
			typ := event
			event = nil
			if len(data) == 0 {
				continue
			}
			msg := data[:len(data)-1]
			data = nil
			if len(typ) > 0 && string(typ) != "message" {
				c.log.Debug("skipped an SSE event that is not a message", zap.ByteString("event", typ), zap.Int("bytes", len(msg)))
				continue
			}
			if len(bytes.TrimSpace(msg)) == 0 {
				continue
			}
			msg = compact(msg)
			closed := c.route(msg, session)
			if !c.deliver(msg) || closed {
				return nil
			}
		case bytes.HasPrefix(line, []byte("data:")), string(line) == "data":
			// A "data" line without a colon has an empty value.
			v := bytes.TrimPrefix(line[min(5, len(line)):], []byte(" "))
			data = append(append(data, v...), '\n')
			if len(data) > c.limit+1 {
				return fmt.Errorf("message exceeds %d bytes", c.limit)
			}
		case bytes.HasPrefix(line, []byte("event:")), string(line) == "event":
			event = append(event[:0], bytes.TrimPrefix(line[min(6, len(line)):], []byte(" "))...)
		}
		// Comments, ids and retry times carry nothing ACP needs.
	}
	if errors.Is(lines.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("message exceeds %d bytes", c.limit)
	}
	if err := lines.Err(); err != nil {
		return err
	}
	return io.EOF // an event the stream did not finish is not dispatched
}

// route notes what an incoming message tells about streams: a request on a
// session's stream is answered with that session's header, and a response
// naming a new session means its stream should open. It reports whether
// msg, on session's stream, is the answer that closed that session: the
// stream has nothing more to carry, and ends (a server that holds it open
// would otherwise keep a GET, and this side a reader, for each session the
// connection ever closed).
func (c *httpClient) route(msg []byte, session string) (closed bool) {
	m, err := wire.Parse(msg)
	if err != nil {
		return false
	}
	if m.IsRequest() && session != "" {
		c.mu.Lock()
		c.respSession[idKey(m.ID)] = session
		c.mu.Unlock()
	}
	if m.IsResponse() {
		c.mu.Lock()
		ended, ok := c.closing[idKey(m.ID)]
		delete(c.closing, idKey(m.ID))
		c.mu.Unlock()
		closed = ok && ended == session && session != "" && closedSession(m.Error)
	}
	if m.IsResponse() && len(m.Result) > 0 {
		if s := sessionOf(m.Result); s != "" {
			c.wg.Add(1) // while this reader holds the group
			go func() {
				defer c.wg.Done()
				// Best effort: the first message for the session retries.
				ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
				defer cancel()
				_ = c.openSession(ctx, s)
			}()
		}
	}
	return closed
}

// sseLine is a bufio.SplitFunc for the lines of an SSE stream, which end
// in CR LF, LF or a CR alone, as the spec allows a server to end them. A
// final line with no end is left out: it cannot finish an event.
func sseLine(data []byte, atEOF bool) (advance int, token []byte, err error) {
	end := bytes.IndexByte(data, '\n')
	if end < 0 {
		end = len(data)
	}
	if cr := bytes.IndexByte(data[:end], '\r'); cr >= 0 {
		if cr+1 == len(data) && !atEOF {
			return 0, nil, nil // an LF may follow
		}
		if cr+1 < len(data) && data[cr+1] == '\n' {
			return cr + 2, data[:cr], nil
		}
		return cr + 1, data[:cr], nil
	}
	if end < len(data) {
		return end + 1, data[:end], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// Close ends the connection with DELETE and stops its streams.
func (c *httpClient) Close() error {
	c.wmu.Lock()
	id := c.connID
	c.wmu.Unlock()
	select {
	case <-c.failed:
	default:
		if id != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if resp, err := c.request(ctx, http.MethodDelete, nil, http.Header{HeaderConnectionID: {id}}); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
	}
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}
