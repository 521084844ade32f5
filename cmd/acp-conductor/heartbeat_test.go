package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/blackhole"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// TestRemoteConnectHeartbeat: remote-connect, the dialing side of a local
// conductor's ws:// component, fails naming the URL and the heartbeat when
// the network to the server is lost.
func TestRemoteConnectHeartbeat(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--ping-interval", "0", "--", shellQuote(demo)+" sample-agent")
	relay, err := blackhole.Listen(hostPort(u))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	url := "ws://" + relay.Addr() + "/acp"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, stdin, stdout, stderr := startPiped(t, ctx, append(cleanEnv(), `ACP_CONDUCTOR_REMOTE_HEADERS={"Authorization":"Bearer tok-123"}`),
		"remote-connect", "--ping-interval", "100ms", url)
	stdin.Write([]byte(initialize + "\n"))
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("initialize: %q, %v\n%s\n%s", line, err, stderr, log)
	}
	relay.Blackhole()
	err = cmd.Wait()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("remote-connect: %v, want exit 1\n%s", err, stderr)
	}
	if s := stderr.String(); !strings.Contains(s, url) || !strings.Contains(s, "heartbeat lost") {
		t.Errorf("stderr %q: want the URL and the heartbeat", s)
	}
}

// startPiped starts the binary with args and env, its stdin and stdout
// piped; its stderr is gathered, to read once it has exited.
func startPiped(t *testing.T, ctx context.Context, env []string, args ...string) (*exec.Cmd, io.WriteCloser, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	return cmd, stdin, stdout, stderr
}

// hostPort is the HOST:PORT of an endpoint URL.
func hostPort(u string) string {
	hp := strings.TrimPrefix(u, "http://")
	if i := strings.IndexByte(hp, '/'); i >= 0 {
		hp = hp[:i]
	}
	return hp
}

func TestPingIntervalFlag(t *testing.T) {
	agent := shellQuote(demo) + " sample-agent"
	for _, args := range [][]string{
		{"serve", "--ping-interval", "-1s", "--", agent},
		{"remote-connect", "--ping-interval", "-1s", "ws://127.0.0.1:1/acp"},
	} {
		r := acp(t, "", []string{"ACP_CONDUCTOR_TOKEN=x"}, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "--ping-interval must be positive") {
			t.Errorf("%q: exit %d, stderr %q, want 1 and the flag named", args, r.code, r.stderr)
		}
	}
}

// TestRemoteAgentHeartbeat: a local conductor whose remote agent's network
// is lost (a chain file's ping_interval, serve's own pings off) fails the
// prompt in flight with an error, and exits naming the URL and the
// heartbeat, rather than hang: the editor's answer says so.
func TestRemoteAgentHeartbeat(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-7"}, "--ping-interval", "0", "--log-level", "debug", "--", "sleep 1000")
	relay, err := blackhole.Listen(hostPort(u))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	url := "ws://" + relay.Addr() + "/acp"
	chain := writeFile(t, "chain.yaml", "agent:\n  url: "+url+"\n  headers: {Authorization: \"Bearer tok-7\"}\n  ping_interval: 100ms\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, stdin, stdout, stderr := startPiped(t, ctx, cleanEnv(), "agent", "--config", chain)
	// The remote agent, a sleep, never answers: initialize is in flight
	// when the network goes, once serve has started the chain for it.
	stdin.Write([]byte(initialize + "\n"))
	if !waitLine(ctx, log, "started component") {
		t.Fatalf("serve started no chain:\n%s", log)
	}
	relay.Blackhole()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	// The editor is told why: the component's last stderr line rides in
	// the error's data.
	if err != nil || !strings.Contains(line, `"id":1`) || !strings.Contains(line, `"error"`) || !strings.Contains(line, "heartbeat lost") {
		t.Errorf("initialize answered %q (%v), want an error naming the heartbeat", line, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err == nil {
		t.Errorf("the local conductor exited 0 after its agent's network was lost")
	}
	if s := stderr.String(); !strings.Contains(s, "connection to "+url+" lost") || !strings.Contains(s, "heartbeat lost") {
		t.Errorf("the local conductor's log does not name %s and the heartbeat:\n%s", url, s)
	}
}
