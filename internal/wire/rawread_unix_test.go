//go:build unix

package wire

import (
	"errors"
	"io"
	"os"
	"testing"
)

// TestNonblockingPipe reads lines through a pipe as the conductor does (its
// end in non-blocking mode, read with raw system calls where they are in
// use): lines split across writes arrive whole, the writer's close is
// io.EOF, and closing the reading end ends a Recv that waits.
func TestNonblockingPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch := NewLineChannel(r, w, 0)
	got := make(chan string)
	errs := make(chan error, 1)
	go func() {
		for {
			line, err := ch.Recv()
			if err != nil {
				errs <- err
				close(got)
				return
			}
			got <- string(line)
		}
	}()
	for _, part := range []string{`{"a":`, "1}\n{\"b\"", ":2}\n"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		if line := <-got; line != want {
			t.Errorf("Recv = %q, want %q", line, want)
		}
	}
	// Nothing more is written: Recv waits until the reading end is closed.
	r.Close()
	if _, open := <-got; open {
		t.Fatal("Recv returned a line after the close")
	}
	if err := <-errs; !errors.Is(err, os.ErrClosed) {
		t.Errorf("Recv after Close = %v, want os.ErrClosed", err)
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	ch2 := NewLineChannel(r2, nil, 0)
	if _, err := w2.Write([]byte("{\"c\":3}\n")); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if line, err := ch2.Recv(); err != nil || string(line) != `{"c":3}` {
		t.Errorf("Recv = %q, %v", line, err)
	}
	if _, err := ch2.Recv(); err != io.EOF {
		t.Errorf("Recv at the writer's close = %v, want io.EOF", err)
	}
}

// TestRecvAllocations: reading a line from a pipe allocates the line's copy and nothing else, and the
// copy keeps its newline just past its end for WithNewline, CR LF or not.
func TestRecvAllocations(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ch := NewLineChannel(r, w, 0)
	for _, sent := range []string{"{\"a\":1}\n", "{\"a\":1}\r\n"} {
		if _, err := w.Write([]byte(sent)); err != nil {
			t.Fatal(err)
		}
		line, err := ch.Recv()
		if err != nil || string(line) != `{"a":1}` {
			t.Fatalf("Recv = %q, %v", line, err)
		}
		if got := ch.WithNewline(line); string(got) != "{\"a\":1}\n" {
			t.Errorf("WithNewline after %q = %q, want the line and its newline", sent, got)
		}
	}
	if got := ch.WithNewline([]byte(`{"a":1}`)); got != nil {
		t.Errorf("WithNewline of a line Recv did not return = %q, want nil", got)
	}
	if got := (*LineChannel)(nil).WithNewline([]byte("{}\n")[:2]); got != nil {
		t.Errorf("WithNewline on a nil channel = %q, want nil", got)
	}
	line := []byte("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}\n")
	n := testing.AllocsPerRun(200, func() {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Recv(); err != nil {
			t.Fatal(err)
		}
	})
	if n != 1 {
		t.Errorf("Recv allocates %v times a line, want 1: the line's copy", n)
	}
}
