//go:build linux

package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/blackhole"
	"github.com/acp-conductor/acp-conductor/transport"
)

// TestServeHeartbeat: serve with --ping-interval, reached through a relay
// that then loses the network (neither socket closed), ends the connection
// for its lost heartbeat and stops its chain: the agent is gone from the
// process table.
func TestServeHeartbeat(t *testing.T) {
	marker := "ACP_TEST_HEARTBEAT=" + strconv.FormatUint(rand.Uint64(), 16)
	u, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123", marker}, "--ping-interval", "100ms", "--", shellQuote(demo)+" sample-agent")
	relay, err := blackhole.Listen(hostPort(u))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The client's own pings are off: this is about what serve notices.
	c := dialInitialized(ctx, t, "ws://"+relay.Addr()+"/acp", transport.DialOptions{
		Header: http.Header{"Authorization": {"Bearer tok-123"}}, PingInterval: -1}, log)
	defer c.Close()
	chain := func() []int {
		var pids []int
		for _, pid := range markedPIDs(marker) {
			if pid != cmd.Process.Pid {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	if len(chain()) == 0 {
		t.Fatalf("no process of the chain in the process table\n%s", log)
	}

	relay.Blackhole()
	if !waitLine(ctx, log, "connection ended: heartbeat lost") || !waitLine(ctx, log, "chain stopped") {
		t.Fatalf("no lost heartbeat and stopped chain logged:\n%s", log)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "heartbeat lost") && !strings.Contains(line, `"connection"`) {
			t.Errorf("the log line does not name the connection: %s", line)
		}
	}
	// The chain's processes are reaped along its shutdown path, after the
	// line above; poll the process table until they are gone.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for left := chain(); len(left) > 0; left = chain() {
		select {
		case <-ctx.Done():
			t.Fatalf("the chain still runs after its connection's heartbeat was lost: %v\n%s", describePIDs(left), log)
		case <-tick.C:
		}
	}
}
