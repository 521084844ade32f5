package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The relay spins before its waits (wire.EnableSpin) only where that pays:
// on two CPUs or more, as the outermost conductor of a chain, on the one P
// it sets, unless the benchmark turns it off or the spin setting is 0. The
// "starting" line says which.
func TestSpinDecision(t *testing.T) {
	manyCPUs := runtime.NumCPU() >= 2
	for _, c := range []struct {
		name string
		env  []string
		want bool
	}{
		{"by default", nil, manyCPUs},
		{"inside another conductor's chain", []string{"ACP_CONDUCTOR_CHAIN=c1"}, false},
		{"with GOMAXPROCS set", []string{"GOMAXPROCS=2"}, false},
		{"with the trick off", []string{"ACP_BENCH_DISABLE=spin"}, false},
		{"with another trick off", []string{"ACP_BENCH_DISABLE=writev"}, manyCPUs},
		{"with spin 0", []string{"ACP_CONDUCTOR_SPIN=0"}, false},
		{"with spin 100us", []string{"ACP_CONDUCTOR_SPIN=100us"}, manyCPUs},
	} {
		t.Run(c.name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "acp.log")
			r := acp(t, "", append([]string{"GOMAXPROCS="}, c.env...), "proxy", "--log-file", logFile, "--log-format", "json")
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if got := spun(t, logFile); got != c.want {
				t.Errorf("spin = %v, want %v", got, c.want)
			}
		})
	}
}

// spun reads, from the JSON log file of a conductor that has run, whether
// its "starting" line, the first, says it spun.
func spun(t *testing.T, logFile string) bool {
	t.Helper()
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	var entry struct {
		Msg  string
		Spin *bool
	}
	if err := json.Unmarshal([]byte(first), &entry); err != nil || entry.Msg != "starting" || entry.Spin == nil {
		t.Fatalf("first log line = %q (%v), want the starting line with its spin field", first, err)
	}
	return *entry.Spin
}
