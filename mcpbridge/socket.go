package mcpbridge

import (
	"bytes"
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

// serveSocket accepts shim connections until the listener is closed, at
// most maxHandshakes of them handshaking at a time.
func (b *Bridge) serveSocket(ctx context.Context) error {
	for {
		select {
		case b.greeters <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		nc, err := b.unix.AcceptUnix()
		if err != nil {
			<-b.greeters
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
			<-b.greeters
			continue
		}
		b.group.Go(func() error { b.admit(nc); return nil })
	}
}

// admit checks a shim's handshake and, if its token is good, serves it as a
// Conn on this goroutine.
func (b *Bridge) admit(nc *net.UnixConn) {
	d, err := b.handshake(nc)
	<-b.greeters
	if err != nil {
		b.untrack(nc)
		nc.Close()
		return
	}
	c := &Conn{ServerID: d.serverID, Name: d.name, Transport: TransportStdio, decls: &b.decls, decl: d,
		t: &socketConn{nc: nc, ch: wire.NewLineChannel(nc, nc, b.maxBytes)}}
	if b.adopt(nc, c) {
		b.run(c)
	}
}

// handshake reads a shim's hello, at most maxHelloBytes, within the
// greeting time, and answers it.
func (b *Bridge) handshake(nc *net.UnixConn) (*declaration, error) {
	nc.SetDeadline(time.Now().Add(b.greeting))
	line, err := readHello(nc)
	if errors.Is(err, io.EOF) && len(line) == 0 {
		return nil, err // connected and left without a word: nothing to refuse
	}
	var d *declaration
	if err == nil {
		d, err = b.checkHello(line)
	}
	if err != nil {
		if !errors.Is(err, net.ErrClosed) { // else Serve is stopping
			// Never log the presented token: it may be a near miss.
			b.refusals.refused("refused MCP shim connection", zap.Error(err))
			w := welcome{Error: err.Error()}
			if e, ok := errors.AsType[*wire.Error](err); ok {
				w.Error, w.Code = e.Message, e.Code
			}
			ans, _ := json.Marshal(w)
			nc.Write(append(ans, '\n'))
		}
		return nil, err
	}
	ans, _ := json.Marshal(welcome{OK: true})
	if _, err := nc.Write(append(ans, '\n')); err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return d, nil
}

// readHello reads the hello line. The shim sends nothing else before the
// answer, so the line is all there is to read, and anything after it is a
// peer that is not a shim.
func readHello(r io.Reader) ([]byte, error) {
	buf := make([]byte, maxHelloBytes)
	n := 0
	for {
		m, err := r.Read(buf[n:])
		n += m
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			if i != n-1 {
				return nil, errors.New("data after the handshake line")
			}
			return buf[:i], nil
		}
		if err != nil {
			return buf[:n], err
		}
		if n == len(buf) {
			return nil, fmt.Errorf("handshake longer than %d bytes", maxHelloBytes)
		}
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
