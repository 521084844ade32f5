package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"golang.org/x/sync/errgroup"
)

// RunShim is the mcp-shim command: it connects to the bridge at socket,
// presents token, then copies stdin to the bridge and the bridge's messages
// to stdout until the bridge closes the connection. The agent closing stdin
// ends the Conn, and the shim goes on until the bridge closes in turn, so
// nothing the conductor sends in between is lost. It returns nil when the
// bridge closed the connection, and ctx's error if ctx ended first.
//
// The copy is byte for byte: the bridge frames and size-checks lines, so an
// oversize message is answered by the conductor instead of dropped here.
// When the connection ends, RunShim closes stdin if it is an io.Closer, to
// interrupt a pending read; it waits for that read, so stdin must be
// something Close interrupts (a pipe, or a non-blocking *os.File).
func RunShim(ctx context.Context, stdin io.Reader, stdout io.Writer, socket, token string) error {
	if socket == "" || token == "" {
		return fmt.Errorf("mcpbridge: %s and %s are not set: the shim is run by an agent, from a declaration acp-conductor made", EnvSocket, EnvToken)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("mcpbridge: connecting to the conductor: %w", err)
	}
	conn := nc.(*net.UnixConn)

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	g.Go(func() error {
		// Whatever ends the shim, closing both ends unblocks both copies.
		<-ctx.Done()
		conn.Close()
		if c, ok := stdin.(io.Closer); ok {
			c.Close()
		}
		return nil
	})
	g.Go(func() error {
		defer cancel()
		in := bufio.NewReaderSize(conn, maxWelcomeBytes)
		if err := greet(conn, in, token); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if r, ok := errors.AsType[*refusedError](err); ok {
				refuseClient(stdin, stdout, r.e)
			}
			return err
		}
		g.Go(func() error {
			// Hide any WriterTo or ReaderFrom: Close must be able to
			// interrupt a plain read, which a splice may not be.
			io.Copy(struct{ io.Writer }{conn}, struct{ io.Reader }{stdin})
			// The agent is done with the server, or the bridge with the
			// shim; either way the copy to stdout decides the outcome.
			// The bridge's Recv sees EOF, and its Close ends that copy.
			conn.CloseWrite()
			return nil
		})
		_, err := io.Copy(stdout, in)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) && ctx.Err() == nil {
			// ECONNRESET only says the bridge closed with input unread.
			return fmt.Errorf("mcpbridge: relaying to stdout: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	return parent.Err()
}

// greet sends the hello line and reads the bridge's answer.
func greet(conn net.Conn, in *bufio.Reader, token string) error {
	line, _ := json.Marshal(hello{Version: shimVersion, Token: token})
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("mcpbridge: handshake: %w", err)
	}
	ans, err := in.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("mcpbridge: handshake: %w", err)
	}
	var w welcome
	if err := json.Unmarshal(bytes.TrimSpace(ans), &w); err != nil {
		return fmt.Errorf("mcpbridge: handshake: %w", err)
	}
	if !w.OK {
		if w.Code != 0 {
			return &refusedError{&wire.Error{Code: w.Code, Message: w.Error}}
		}
		return fmt.Errorf("mcpbridge: the conductor refused this shim: %s", w.Error)
	}
	return nil
}

// A refusedError is the bridge's refusal of a revoked token, which the
// client is owed too.
type refusedError struct{ e *wire.Error }

func (r *refusedError) Error() string {
	return "mcpbridge: the conductor refused this shim: " + r.e.Message
}

// refuseClient answers each request the client sends with e, until it has
// answered an initialize, the handshake no client goes past, as the
// conductor answers a refused bridged connection: the client would else
// hear only its server exit. A client on MCP 2026-07-28 asks
// server/discover first, and may fall back to initialize.
func refuseClient(stdin io.Reader, stdout io.Writer, e *wire.Error) {
	in := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := in.ReadSlice('\n')
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return // the client is gone, or its line is too long to read
		}
		m, perr := wire.Parse(bytes.TrimSpace(line))
		if perr != nil {
			return // a batch, or not JSON-RPC: the client sees the server exit
		}
		if m.IsRequest() {
			if _, werr := stdout.Write(append(wire.ErrorResponse(m.ID, e).Bytes(), '\n')); werr != nil {
				return
			}
			if m.Method == "initialize" {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
