package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// DefaultPingInterval is how often either end of a WebSocket pings the other
// when Server.PingInterval or DialOptions.PingInterval is zero.
const DefaultPingInterval = 30 * time.Second

// ErrHeartbeat is returned, wrapped, by the Read of a WebSocket whose peer
// did not answer a ping in time: its network was lost (no FIN, no RST), or
// it stopped reading.
var ErrHeartbeat = errors.New("transport: heartbeat lost")

// heartbeat configures a WebSocket's pings. A zero interval means none.
type heartbeat struct {
	interval time.Duration
	timeout  time.Duration // zero means interval
	pong     func()        // tests: called after each pong
	unsure   func()        // tests: called after a late pong with no Read pending
}

// pingInterval turns a PingInterval field into an interval: zero is the
// default, negative is none.
func pingInterval(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultPingInterval
	case d < 0:
		return 0
	}
	return d
}

// wsConn is a Conn over a WebSocket: one text frame per message, either side.
//
// Without a heartbeat, a peer whose network vanished is noticed only when
// the kernel gives up on TCP, a quarter of an hour later. So each end pings
// every interval and closes the connection when no pong comes within the
// timeout; Read then fails with ErrHeartbeat. The library reads pongs (and
// answers the peer's pings) inside Read, so a pong can only be seen while a
// Read is pending. A reader held back by flow control (its destination full)
// has none: a late pong then proves nothing, and the heartbeat tries again
// at the next interval rather than closing a connection that may be live.
type wsConn struct {
	ws        *websocket.Conn
	closeOnce sync.Once
	reading   atomic.Int32 // Reads pending

	stopBeat context.CancelFunc
	beating  sync.WaitGroup // the heartbeat goroutine, owned by the Conn
	lostMu   sync.Mutex
	lost     error // why the heartbeat closed the connection
}

func newWSConn(ws *websocket.Conn, limit int, hb heartbeat) *wsConn {
	ws.SetReadLimit(int64(limit))
	c := &wsConn{ws: ws, stopBeat: func() {}}
	if hb.interval > 0 {
		if hb.timeout <= 0 {
			hb.timeout = hb.interval
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.stopBeat = cancel
		c.beating.Add(1)
		go func() {
			defer c.beating.Done()
			c.beat(ctx, hb)
		}()
	}
	return c
}

// beat pings every hb.interval until ctx is done or a pong is late, and
// then closes the connection at once: a peer that cannot answer a ping
// cannot hear a close frame either, and waiting for its answer would only
// hold the chain up longer.
func (c *wsConn) beat(ctx context.Context, hb heartbeat) {
	t := time.NewTicker(hb.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, hb.timeout)
		readingBefore := c.reading.Load() > 0
		err := c.ws.Ping(pctx)
		late := pctx.Err() == context.DeadlineExceeded
		cancel()
		switch {
		case err == nil:
			if hb.pong != nil {
				hb.pong()
			}
			continue
		case ctx.Err() != nil || !late:
			return // closed, by Close or by the peer; Read says which
		case !readingBefore || c.reading.Load() == 0:
			// No Read to take the pong for part of the wait: unknown.
			if hb.unsure != nil {
				hb.unsure()
			}
			continue
		}
		c.lostMu.Lock()
		c.lost = fmt.Errorf("%w: no pong within %s", ErrHeartbeat, hb.timeout)
		c.lostMu.Unlock()
		_ = c.ws.CloseNow()
		return
	}
}

// heartbeatLost returns why the heartbeat closed the connection, or nil.
func (c *wsConn) heartbeatLost() error {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	return c.lost
}

func (c *wsConn) Read(ctx context.Context) ([]byte, error) {
	for {
		c.reading.Add(1)
		typ, data, err := c.ws.Read(ctx)
		c.reading.Add(-1)
		if err != nil {
			if lost := c.heartbeatLost(); lost != nil {
				return nil, lost
			}
			switch websocket.CloseStatus(err) {
			case websocket.StatusNormalClosure, websocket.StatusGoingAway:
				return nil, io.EOF
			}
			if errors.Is(err, net.ErrClosed) {
				return nil, ErrClosed
			}
			return nil, err
		}
		if typ != websocket.MessageText {
			continue // the RFD: binary frames are ignored
		}
		return data, nil
	}
}

func (c *wsConn) Write(ctx context.Context, msg []byte) error {
	err := c.ws.Write(ctx, websocket.MessageText, msg)
	if err != nil {
		if lost := c.heartbeatLost(); lost != nil {
			return lost
		}
	}
	return err
}

// closeNow closes the connection without its closing handshake: for a
// server that may wait no longer.
func (c *wsConn) closeNow() {
	c.stopBeat()
	_ = c.ws.CloseNow()
}

func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		c.stopBeat()
		c.beating.Wait()
		// Close waits a bounded time for the peer's close frame.
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	})
	return nil
}
