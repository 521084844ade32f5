package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
)

// clientConfig is the --config of peers/client.mjs (see its header).
type clientConfig struct {
	Mode              string            `json:"mode,omitempty"`
	Prompts           []string          `json:"prompts,omitempty"`
	CancelPrompt      string            `json:"cancelPrompt,omitempty"`
	ActiveTimeoutMs   int               `json:"activeTimeoutMs,omitempty"`
	Chunks            int               `json:"chunks,omitempty"`
	Sessions          int               `json:"sessions,omitempty"`
	PromptsPerSession int               `json:"promptsPerSession,omitempty"`
	HoldPrompt        string            `json:"holdPrompt,omitempty"`
	HoldAction        string            `json:"holdAction,omitempty"`
	Files             map[string]string `json:"files,omitempty"`
	Cwd               string            `json:"cwd,omitempty"`
	ChildEnv          map[string]string `json:"childEnv,omitempty"`
	TimeoutMs         int               `json:"timeoutMs,omitempty"`
	ExitTimeoutMs     int               `json:"exitTimeoutMs,omitempty"`
	// A remote editor: connect to URL over Transport ("ws" or "http")
	// instead of spawning a command.
	URL       string            `json:"url,omitempty"`
	Transport string            `json:"transport,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// WebSocket subprotocols the SDK's ws-client requests.
	Protocols           []string `json:"protocols,omitempty"`
	CancelRequestPrompt string   `json:"cancelRequestPrompt,omitempty"`
	NullError           bool     `json:"nullError,omitempty"`
	BOM                 bool     `json:"bom,omitempty"`

	expectResults []string // what checkConversation expects of the file reads
	env           []string // added to the client's own environment
}

// summary is the last line peers/client.mjs prints.
type summary struct {
	Type        string          `json:"type"`
	Mode        string          `json:"mode"`
	PID         int             `json:"conductorPid"`
	Initialize  json.RawMessage `json:"initialize"`
	Sessions    []sessionResult `json:"sessions"`
	Permissions []struct {
		SessionID  string   `json:"sessionId"`
		ToolCallID string   `json:"toolCallId"`
		Options    []string `json:"options"`
	} `json:"permissionRequests"`
	FSReads []struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
	} `json:"fsReads"`
	Unexpected   json.RawMessage `json:"unexpected"`
	WireMessages int             `json:"wireMessages"`
	SDKReorders  json.RawMessage `json:"sdkReorders"`
	Exit         *struct {
		ExitCode       *int    `json:"exitCode"`
		Signal         *string `json:"signal"`
		KilledByClient bool    `json:"killedByClient"`
	} `json:"exit"`
	Failures []string `json:"failures"`
}

type sessionResult struct {
	SessionID string         `json:"sessionId"`
	Prompts   []promptResult `json:"prompts"`
	Others    []string       `json:"others"`
}

type promptResult struct {
	Tag        string   `json:"tag"`
	Text       string   `json:"text"`
	Chunks     int      `json:"chunks"`
	StopReason *string  `json:"stopReason"`
	Error      *string  `json:"error"`
	Updates    []int    `json:"updates"`
	Results    []string `json:"results"`
}

type clientEvent struct {
	Type      string `json:"type"`
	Event     string `json:"event"`
	PID       int    `json:"conductorPid"`
	SessionID string `json:"sessionId"`
}

// A runningClient is peers/client.mjs driving a command.
type runningClient struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testio.Buffer
	events chan clientEvent
	done   chan struct{} // closed when the client has exited
	sum    *summary
	err    error // the client's exit error
	lines  []string
}

// startClient starts the SDK client on argv (the conductor command line).
// The client's stderr, which carries the conductor's and the components'
// stderr too, is logged when t fails.
func startClient(t *testing.T, ctx context.Context, cfg clientConfig, argv []string) *runningClient {
	t.Helper()
	if cfg.TimeoutMs == 0 {
		cfg.TimeoutMs = timeoutMs(ctx, 60*time.Second)
	}
	if cfg.Cwd == "" {
		cfg.Cwd = t.TempDir()
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{filepath.Join(peersDir, "client.mjs"), "--config", string(conf), "--"}, argv...)
	cmd := exec.CommandContext(ctx, nodeBin, args...)
	cmd.Dir = peersDir
	if len(cfg.env) > 0 {
		cmd.Env = append(cmd.Environ(), cfg.env...)
	}
	rc := &runningClient{
		cmd:    cmd,
		stderr: &testio.Buffer{},
		events: make(chan clientEvent, 16),
		done:   make(chan struct{}),
	}
	cmd.Stderr = rc.stderr
	if rc.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client: %s", strings.Join(argv, " | "))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the client: %v", err)
	}
	t.Cleanup(func() {
		rc.stdin.Close()
		if t.Failed() {
			// Do not sit out the client's own timeout; the marker cleanup
			// (registered earlier, so run later) reaps what it leaves.
			select {
			case <-rc.done:
			default:
				cmd.Process.Kill()
			}
		}
		<-rc.done
		if t.Failed() {
			t.Logf("client, conductor and component stderr:\n%s", rc.stderr.String())
		}
	})
	go func() {
		defer close(rc.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
		for sc.Scan() {
			line := sc.Text()
			rc.lines = append(rc.lines, line)
			var ev clientEvent
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "event" {
				select {
				case rc.events <- ev:
				default:
				}
			}
		}
		rc.err = cmd.Wait()
		close(rc.events)
		if n := len(rc.lines); n > 0 {
			var s summary
			if json.Unmarshal([]byte(rc.lines[n-1]), &s) == nil && s.Type == "summary" {
				rc.sum = &s
			}
		}
	}()
	return rc
}

// event waits for the client's next event.
func (rc *runningClient) event(t *testing.T, ctx context.Context) clientEvent {
	t.Helper()
	select {
	case ev, ok := <-rc.events:
		if !ok {
			<-rc.done
			t.Fatalf("client exited (%v) before the expected event; output:\n%s", rc.err, strings.Join(rc.lines, "\n"))
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("waiting for a client event: %v", ctx.Err())
	}
	panic("unreachable")
}

// wait waits for the client to exit and returns its summary. It fails t if
// the client printed none.
func (rc *runningClient) wait(t *testing.T) *summary {
	t.Helper()
	<-rc.done
	if rc.sum == nil {
		t.Fatalf("client printed no summary (exit: %v); stdout:\n%s", rc.err, strings.Join(rc.lines, "\n"))
	}
	return rc.sum
}

// runClient runs the client to completion and fails t on any failure it
// reports or a non-zero exit.
func runClient(t *testing.T, ctx context.Context, cfg clientConfig, argv []string) *summary {
	t.Helper()
	rc := startClient(t, ctx, cfg, argv)
	s := rc.wait(t)
	for _, f := range s.Failures {
		t.Errorf("client: %s", f)
	}
	if rc.err != nil {
		var ee *exec.ExitError
		if !errors.As(rc.err, &ee) || len(s.Failures) == 0 {
			t.Errorf("client exited: %v", rc.err)
		}
	}
	return s
}

// timeoutMs is what is left of ctx's deadline, less a margin, or dflt.
func timeoutMs(ctx context.Context, dflt time.Duration) int {
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d) - 5*time.Second
		if left < time.Second {
			left = time.Second
		}
		return int(left / time.Millisecond)
	}
	return int(dflt / time.Millisecond)
}

// testContext returns a context bounded by d and by the test's own deadline.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	if dl, ok := t.Deadline(); ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl.Add(-2*time.Second))
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	t.Cleanup(cancel)
	return ctx
}

// exitCode is the conductor's exit code in s, or -1.
func (s *summary) exitCode() int {
	if s.Exit == nil || s.Exit.ExitCode == nil {
		return -1
	}
	return *s.Exit.ExitCode
}

func (s *summary) exitString() string {
	if s.Exit == nil {
		return "did not exit"
	}
	b, _ := json.Marshal(s.Exit)
	return string(b)
}
