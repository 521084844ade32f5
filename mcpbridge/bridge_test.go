package mcpbridge

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCloseStopsServe(t *testing.T) {
	b, err := New(Options{HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	accept, conns := parked()
	done := make(chan error, 1)
	go func() { done <- b.Serve(context.Background(), accept) }()
	decl := b.Stdio("srv-1", "tools")
	sh := startShim(t, t.Context(), decl)
	sh.write(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c := next(t, conns)
	recv(t, c)

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop Serve")
	}
	if _, err := c.Recv(); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Serve stopped: %v, want ErrClosed", err)
	}
	if err := sh.wait(t); err != nil {
		t.Errorf("shim after Close: %v", err)
	}
	if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory after Close: %v", err)
	}
	if _, err := net.Dial("unix", b.socket); err == nil {
		t.Error("socket still accepts after Close")
	}
	if err := b.Serve(context.Background(), accept); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close: %v, want ErrClosed", err)
	}
}

func TestServeTwice(t *testing.T) {
	accept, conns := parked()
	b := startBridge(t, Options{}, accept)
	// startBridge's Serve may not have begun: wait until it accepts.
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	sh.write(t, `{}`)
	select {
	case <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not accept the shim")
	}
	if err := b.Serve(context.Background(), accept); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Serve: %v", err)
	}
}
