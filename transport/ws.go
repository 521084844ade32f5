package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/coder/websocket"
)

// wsConn is a Conn over a WebSocket: one text frame per message, either side.
type wsConn struct {
	ws        *websocket.Conn
	closeOnce sync.Once
}

func newWSConn(ws *websocket.Conn, limit int) *wsConn {
	ws.SetReadLimit(int64(limit))
	return &wsConn{ws: ws}
}

func (c *wsConn) Read(ctx context.Context) ([]byte, error) {
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
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
	return c.ws.Write(ctx, websocket.MessageText, msg)
}

func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		// Close waits a bounded time for the peer's close frame.
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	})
	return nil
}
