package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The memory bound the conductor keeps whoever stops reading (issue 16,
// target 4; issue 17, item 3): peak RSS within 64 MiB + 2 × max_message_bytes.
const (
	memMaxMessage = 2 << 20
	memBound      = 64<<20 + 2*memMaxMessage
)

// memBinaries builds, once, what the memory tests run, without the race
// detector: the conductor (whose shadow memory would swamp what is
// measured), the flooding agent and the Go proxy (which would take minutes
// to pass hundreds of MiB).
var memBinaries = sync.OnceValues(func() ([3]string, error) {
	var bins [3]string
	for i, pkg := range []string{"./cmd/acp-conductor", "./integration/testdata/floodagent", "./integration/testdata/goproxy"} {
		if i == 0 && os.Getenv("ACP_IT_CONDUCTOR") != "" {
			bins[0] = conductor // prebuilt: measured as it is
			continue
		}
		out := filepath.Join(binDir, "mem-"+filepath.Base(pkg))
		cmd := exec.Command(goTool(), "build", "-o", out, pkg)
		cmd.Dir = repoRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			return bins, fmt.Errorf("building %s: %v\n%s", pkg, err, b)
		}
		bins[i] = out
	}
	return bins, nil
})

// memChain is a conductor started by a test that plays the editor itself,
// on raw pipes, so that it can stop reading.
type memChain struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	events chan string // the conductor's log lines that a test waits for
	long   []byte      // recv's buffer for long lines
}

// startMemChain runs the conductor on components (proxies, then the
// agent), with debug logs in JSON on stderr; the log lines that contain any
// of watch go to events.
func startMemChain(t *testing.T, components []string, watch ...string) *memChain {
	t.Helper()
	bins, err := memBinaries()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"agent", "--max-message-bytes", strconv.Itoa(memMaxMessage), "--log-level", "debug", "--log-format", "json"}
	args = append(args, components...)
	cmd := exec.Command(bins[0], args...)
	marker := newMarker()
	cmd.Env = append(os.Environ(), markerVar+"="+marker)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &memChain{t: t, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), events: make(chan string, 16)}
	var logs bytes.Buffer
	var logMu sync.Mutex
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			if logs.Len() < 1<<20 && !strings.Contains(line, "paused reading") {
				logs.WriteString(line + "\n")
			}
			logMu.Unlock()
			for _, w := range watch {
				if strings.Contains(line, w) {
					select {
					case c.events <- line:
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { io.Copy(io.Discard, out); done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		<-scanned
		killMarked(t, marker)
		if t.Failed() {
			logMu.Lock()
			t.Logf("conductor's stderr (pause lines left out):\n%s", logs.String())
			logMu.Unlock()
		}
	})
	return c
}

func (c *memChain) send(format string, args ...any) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		c.t.Fatalf("writing to the conductor: %v", err)
	}
}

// recv returns the next line from the conductor, without its newline. The
// slice is valid until the next call.
func (c *memChain) recv() []byte {
	c.t.Helper()
	line, err := c.out.ReadSlice('\n')
	if err == bufio.ErrBufferFull { // a long line: gather it
		line = append(c.long[:0], line...)
		for err == bufio.ErrBufferFull {
			var more []byte
			more, err = c.out.ReadSlice('\n')
			line = append(line, more...)
		}
		c.long = line
	}
	if err != nil {
		c.t.Fatalf("reading from the conductor: %v", err)
	}
	return line[:len(line)-1]
}

// handshake initializes the chain and opens a session.
func (c *memChain) handshake() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if line := c.recv(); !bytes.Contains(line, []byte(`"id":1,"result"`)) {
		c.t.Fatalf("initialize: %s", clipLine(line))
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if line := c.recv(); !bytes.Contains(line, []byte(`"sessionId":"flood"`)) {
		c.t.Fatalf("session/new: %s", clipLine(line))
	}
}

// await waits for an event line, failing after a generous bound.
func (c *memChain) await(what string) string {
	c.t.Helper()
	select {
	case line := <-c.events:
		return line
	case <-time.After(3 * time.Minute):
		c.t.Fatalf("no sign of %s in the conductor's log", what)
		return ""
	}
}

// status returns a field of the conductor's /proc/PID/status, in bytes.
func (c *memChain) status(field string) int64 {
	c.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			return kb << 10
		}
	}
	c.t.Fatalf("no %s in /proc/%d/status", field, c.cmd.Process.Pid)
	return 0
}

// checkPeak fails the test if the conductor's peak RSS passed the bound.
func (c *memChain) checkPeak() {
	c.t.Helper()
	hwm := c.status("VmHWM")
	c.t.Logf("conductor peak RSS (VmHWM) %.1f MiB, now %.1f MiB; bound %.0f MiB", mib(hwm), mib(c.status("VmRSS")), mib(memBound))
	if hwm > memBound {
		c.t.Errorf("conductor peak RSS %.1f MiB exceeds 64 MiB + 2 × max_message_bytes = %.0f MiB", mib(hwm), mib(memBound))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func clipLine(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// readFlood reads the count updates of a flood prompt (id 3), checking that
// each arrives once and in order, then the prompt's answer.
func (c *memChain) readFlood(count int) {
	c.t.Helper()
	for i := range count {
		line := c.recv()
		want := fmt.Sprintf(`"params":{"_meta":{"seq":%d},`, i)
		if !bytes.Contains(line[:min(len(line), 200)], []byte(want)) {
			c.t.Fatalf("update %d: got %s", i, clipLine(line))
		}
	}
	if line := c.recv(); !bytes.Contains(line, []byte(`"id":3,"result":{"stopReason":"end_turn"}`)) {
		c.t.Fatalf("after %d updates: %s", count, clipLine(line))
	}
}

// TestMemoryStalledReader runs the conductor between peers that stop reading
// while the other side writes as fast as it can, and holds its peak RSS
// (VmHWM of the conductor process itself) to 64 MiB + 2 × max_message_bytes.
// Each test stops reading until the conductor says it has paused reading
// the writer (or, without flow control, until the writer has written
// everything); then it reads everything and checks that nothing was lost
// or reordered.
func TestMemoryStalledReader(t *testing.T) {
	if testing.Short() {
		t.Skip("streams hundreds of MiB")
	}
	bins, err := memBinaries()
	if err != nil {
		t.Fatal(err)
	}
	agent, proxy := bins[1], bins[2]

	for _, tc := range []struct {
		name        string
		count, size int
	}{
		{"small updates", 400_000, 300},
		{"1 MiB updates", 1024, 1 << 20}, // 1 GiB
	} {
		t.Run("editor stops reading/"+tc.name, func(t *testing.T) {
			c := startMemChain(t, []string{agent}, `"msg":"paused reading`, "floodagent: prompt done")
			c.handshake()
			c.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"flood","prompt":[],"_meta":{"flood":{"count":%d,"size":%d}}}}`, tc.count, tc.size)
			t.Logf("while the editor does not read: %s", c.await("the agent being paused or done"))
			t.Logf("conductor RSS %.1f MiB", mib(c.status("VmRSS")))
			c.readFlood(tc.count)
			c.checkPeak()
		})
	}

	t.Run("proxy stops reading", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "stall")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		c := startMemChain(t, []string{"ACP_IT_STALL_FIFO=" + fifo + " " + proxy, agent}, `"msg":"paused reading`, "floodagent: prompt done")
		c.handshake()
		const count = 128 // of 1 MiB
		c.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"flood","prompt":[],"_meta":{"flood":{"count":%d,"size":%d}}}}`, count, 1<<20)
		t.Logf("while the proxy does not read: %s", c.await("the agent being paused or done"))
		t.Logf("conductor RSS %.1f MiB", mib(c.status("VmRSS")))
		if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.readFlood(count)
		c.checkPeak()
	})

	t.Run("editor writes without reading", func(t *testing.T) {
		const requests = 300_000
		c := startMemChain(t, []string{"ACP_IT_ECHOES=" + strconv.Itoa(requests) + " " + agent}, `"msg":"paused reading`, "floodagent: echoes done")
		c.handshake()
		pad := strings.Repeat("p", 1000)
		wrote := make(chan error, 1)
		go func() {
			w := bufio.NewWriterSize(c.in, 64<<10)
			for i := range requests {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"_flood/echo","params":{"i":%d,"pad":"%s"}}`+"\n", 10+i, i, pad)
			}
			wrote <- w.Flush()
		}()
		select {
		case line := <-c.events:
			t.Logf("while the editor does not read: %s", line)
		case err := <-wrote:
			t.Logf("the editor wrote every request without reading one (%v)", err)
			wrote <- err
		case <-time.After(3 * time.Minute):
			t.Fatal("neither a pause nor the end of the requests")
		}
		t.Logf("conductor RSS %.1f MiB", mib(c.status("VmRSS")))
		for i := range requests {
			line := c.recv()
			var m struct {
				ID     int
				Result struct{ I int }
			}
			if err := json.Unmarshal(line, &m); err != nil || m.ID != 10+i || m.Result.I != i {
				t.Fatalf("response %d: %s", i, clipLine(line))
			}
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		c.checkPeak()
	})
}
