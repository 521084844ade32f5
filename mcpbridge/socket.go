package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// serveSocket accepts shim connections until the listener is closed.
func (b *Bridge) serveSocket(ctx context.Context) error {
	for {
		nc, err := b.unix.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil // stopping, or Close got here first
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				// A passing failure: wait and go on rather than stop
				// serving every declared server.
				b.log.Warn("accepting shim connection", zap.Error(err))
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			return fmt.Errorf("mcpbridge: accepting shim connection: %w", err)
		}
		if !b.track(nc) {
			continue
		}
		b.group.Go(func() error { b.admit(nc); return nil })
	}
}

// admit checks a shim's handshake and, if its token is good, serves it as a
// Conn on this goroutine.
func (b *Bridge) admit(nc *net.UnixConn) {
	ch := wire.NewLineChannel(nc, nc, b.maxBytes)
	nc.SetDeadline(time.Now().Add(b.greeting))
	line, err := ch.Recv()
	var d *declaration
	if err == nil {
		d, err = b.checkHello(line)
	}
	if err != nil {
		if !errors.Is(err, net.ErrClosed) { // else Serve is stopping
			// Never log the presented token: it may be a near miss.
			b.log.Warn("refused MCP shim connection", zap.Error(err))
			ans, _ := json.Marshal(welcome{Error: err.Error()})
			ch.Send(ans)
		}
		b.untrack(nc)
		nc.Close()
		return
	}
	ans, _ := json.Marshal(welcome{OK: true})
	if err := ch.Send(ans); err != nil {
		b.untrack(nc)
		nc.Close()
		return
	}
	nc.SetDeadline(time.Time{})
	c := &Conn{ServerID: d.serverID, Name: d.name, Transport: TransportStdio, t: &socketConn{nc: nc, ch: ch}}
	if b.adopt(nc, c) {
		b.run(c)
	}
}

// socketConn is a Conn's transport over a shim's socket.
type socketConn struct {
	nc *net.UnixConn
	ch *wire.LineChannel
}

func (s *socketConn) recv() ([]byte, error) {
	msg, err := s.ch.Recv()
	if err == nil {
		return msg, nil
	}
	var over *wire.OversizeError
	switch {
	case errors.As(err, &over):
		return nil, err
	case errors.Is(err, net.ErrClosed):
		return nil, ErrClosed
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		// A killed shim's socket resets if it had unread input.
		return nil, io.EOF
	}
	return nil, fmt.Errorf("mcpbridge: reading from shim: %w", err)
}

func (s *socketConn) send(msg []byte) error {
	err := s.ch.Send(msg)
	if errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	if err != nil {
		return fmt.Errorf("mcpbridge: writing to shim: %w", err)
	}
	return nil
}

// close ends the connection. The shim reads what was sent before it, then
// end of file.
func (s *socketConn) close() error {
	if err := s.nc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("mcpbridge: %w", err)
	}
	return nil
}
