package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acp-conductor/acp-conductor/mcpbridge"
)

// TestMCPShim runs acp-conductor mcp-shim as an agent would, from a bridge's
// stdio declaration, against a server that answers each request.
func TestMCPShim(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	b, err := mcpbridge.New(mcpbridge.Options{Executable: binary})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ended := make(chan error, 1)
	accept := func(ctx context.Context, c *mcpbridge.Conn) {
		for {
			msg, err := c.Recv()
			if err != nil {
				ended <- err
				return
			}
			var req struct{ ID json.RawMessage }
			json.Unmarshal(msg, &req)
			c.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"server":%q}}`, req.ID, c.ServerID))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx, accept) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	decl := b.Stdio("srv-1", "tools")
	if decl.Command != binary || len(decl.Args) != 1 || decl.Args[0] != "mcp-shim" {
		t.Fatalf("declaration: %+v", decl)
	}
	cmd := exec.Command(decl.Command, decl.Args...)
	cmd.Env = cleanEnv()
	for _, e := range decl.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := `{"jsonrpc":"2.0","id":1,"result":{"server":"srv-1"}}` + "\n"; line != want || err != nil {
		t.Errorf("shim stdout: %q, %v; want %q", line, err, want)
	}
	stdin.Close()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("Recv after the agent closed stdin: %v, want io.EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Conn did not end")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mcp-shim: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("mcp-shim did not exit")
	}
}

func TestMCPShimByHand(t *testing.T) {
	r := acp(t, "", nil, "mcp-shim")
	if r.code != 1 || !strings.Contains(r.stderr, mcpbridge.EnvSocket) || r.stdout != "" {
		t.Errorf("mcp-shim without a declaration: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if help := acp(t, "", nil, "--help"); strings.Contains(help.stdout, "mcp-shim") {
		t.Error("--help lists the hidden mcp-shim command")
	}
}
