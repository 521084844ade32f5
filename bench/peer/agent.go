package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/proxy"
)

// chunkText is the text of every streamed update: a typical chunk of an
// agent's answer.
const chunkText = "Here is one streamed chunk of the agent's answer, a few words long. "

// runAgent is the bench agent. It answers initialize and session/new at
// once; a session/prompt whose params carry _meta {"updates":K,"tag":T} is
// answered with K session/update notifications, each carrying _meta
// {"tag":T,"seq":i}, then end_turn. Every message is written with one system
// call of its own, as an agent streaming an answer does.
//
// It waits for input as the proxy library does: its stdio in non-blocking
// mode, read and written with raw system calls, idle in Go's poller. Blocked
// in read(2) through the runtime's syscall path instead, its runtime's
// monitor thread woke every 20 µs for as long as it waited, so that the
// agent's own cost per round trip grew with whatever stood between it and
// the editor (bench/README.md, History).
func runAgent() error {
	out := wire.Pollable(os.Stdout, 1, "stdout")
	ch := wire.NewLineChannel(wire.Pollable(os.Stdin, 0, "stdin"), out, 0)
	try := ch.TryWriter() // nil when stdout is not a pipe or socket
	var buf []byte
	sessions := 0
	write := func(b []byte) error {
		if try != nil {
			rest, err := try([][]byte{b})
			if err != nil || len(rest) == 0 {
				return err
			}
			b = rest[0] // the pipe is full: wait for the rest in the poller
		}
		_, err := out.Write(b)
		return err
	}
	result := func(id []byte, result string) error {
		buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
		buf = append(buf, id...)
		buf = append(buf, `,"result":`...)
		buf = append(buf, result...)
		buf = append(buf, "}\n"...)
		return write(buf)
	}
	for {
		line, err := ch.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		m, err := wire.Parse(line)
		if err != nil {
			return err
		}
		switch m.Method {
		case "initialize":
			err = result(m.ID, `{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}`)
		case "session/new":
			sessions++
			err = result(m.ID, `{"sessionId":"s`+strconv.Itoa(sessions)+`"}`)
		case "session/prompt":
			p := promptParams(m.Params)
			for i := range p.updates {
				buf = append(buf[:0], `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
				buf = append(buf, p.session...)
				buf = append(buf, `,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`+chunkText+`"}},"_meta":{"tag":`...)
				buf = append(buf, p.tag...)
				buf = append(buf, `,"seq":`...)
				buf = strconv.AppendInt(buf, int64(i), 10)
				buf = append(buf, "}}}\n"...)
				if err = write(buf); err != nil {
					return err
				}
			}
			err = result(m.ID, `{"stopReason":"end_turn"}`)
		default:
			if m.IsRequest() {
				buf = append(wire.ErrorResponse(m.ID, wire.Errorf(-32601, "method not found: %s", m.Method)).Append(buf[:0]), '\n')
				err = write(buf)
			}
		}
		if err != nil {
			return err
		}
	}
}

type prompt struct {
	session []byte // raw JSON string
	tag     []byte // raw JSON number
	updates int
}

// promptParams reads what the agent needs from session/prompt params,
// without decoding the prompt itself.
func promptParams(params []byte) prompt {
	p := prompt{session: []byte(`""`), tag: []byte("0")}
	wire.EachField(params, func(key, val []byte) {
		switch string(key) {
		case `"sessionId"`:
			p.session = val
		case `"_meta"`:
			wire.EachField(val, func(key, val []byte) {
				switch string(key) {
				case `"updates"`:
					p.updates, _ = strconv.Atoi(string(val))
				case `"tag"`:
					p.tag = val
				}
			})
		}
	})
	return p
}

// runProxy is a passthrough proxy: package proxy with no handlers. With
// BENCH_PROXY_CPUPROFILE set it writes a CPU profile there, suffixed with
// its pid.
func runProxy() error {
	if path := os.Getenv("BENCH_PROXY_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path + "." + strconv.Itoa(os.Getpid()))
		if err != nil {
			return err
		}
		defer stop()
	}
	return (&proxy.Proxy{}).Serve(context.Background(), proxy.Stdin(), proxy.Stdout())
}

// runRelay launches the command in args and copies bytes between it and its
// own stdio, both ways, without looking at them: the least any process
// between editor and agent can do, for comparison with the conductor.
func runRelay(args []string) error {
	if len(args) == 0 {
		return errors.New("no command")
	}
	cmd := exec.Command(args[0], args[1:]...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	inR.Close()
	outW.Close()
	go func() {
		io.Copy(inW, os.Stdin)
		inW.Close()
	}()
	if _, err := io.Copy(os.Stdout, outR); err != nil {
		return err
	}
	return cmd.Wait()
}
