package conductor

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestBackoffSchedule: each restart within the window of earlier ones
// waits twice as long as the one before, up to the longest.
func TestBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		first, most time.Duration
		want        []time.Duration // for 0, 1, 2, ... earlier restarts
	}{
		{100 * time.Millisecond, 5 * time.Second, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{100 * time.Millisecond, 300 * time.Millisecond, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}},
		{time.Second, time.Second, []time.Duration{time.Second, time.Second}},
		{time.Hour, 5 * time.Second, []time.Duration{5 * time.Second}}, // the maximum bounds the first too
	} {
		for n, want := range tc.want {
			if got := backoff(n, tc.first, tc.most); got != want {
				t.Errorf("backoff(%d, %v, %v) = %v, want %v", n, tc.first, tc.most, got, want)
			}
		}
	}
	if got := backoff(1000, time.Millisecond, time.Minute); got != time.Minute {
		t.Errorf("after 1000 restarts: %v, want the maximum", got) // no overflow
	}
}

// heldBackoff stands in for the timer of restart back-offs: each wait is
// reported on delays and lasts until the test releases it, or until the
// chain stops.
type heldBackoff struct {
	delays  chan time.Duration
	release chan struct{}
}

func holdBackoff(cfg *Config) *heldBackoff {
	h := &heldBackoff{delays: make(chan time.Duration, 16), release: make(chan struct{})}
	cfg.restartWait = func(d time.Duration, stop <-chan struct{}) bool {
		h.delays <- d
		select {
		case <-h.release:
			return true
		case <-stop:
			return false
		}
	}
	return h
}

// next returns the delay of the next back-off, once it has begun.
func (h *heldBackoff) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-h.delays:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no restart back-off began")
		return 0
	}
}

// starts counts the processes a fake with ACP_TEST_STARTS=path started.
func starts(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// restartedCrasher is a proxy named crasher, restarted when it fails, that
// crashes on a prompt that asks it to.
func restartedCrasher(t *testing.T, dir string, env ...string) Component {
	t.Helper()
	c := fake(t, dir, "crasher", "proxy", append([]string{"ACP_TEST_CRASH_ON_PROMPT=1"}, env...)...)
	c.OnFailure = PolicyRestart
	return c
}

// initAndCrash initializes the chain and crashes its crasher with prompt 1,
// whose error answer comes once the restart's back-off has begun.
func initAndCrash(t *testing.T, e *editor) {
	t.Helper()
	e.send(initLine)
	e.recvMsg()
	e.send(promptLine(1, true))
	failedPrompt(t, e, 1, "crasher")
}

// promptsInBackoff sends prompts 2 to last while the crashed proxy waits
// out its back-off, once the conductor has read them, lets it start.
func promptsInBackoff(t *testing.T, e *editor, h *heldBackoff, last int) {
	t.Helper()
	h.next(t)
	for id := 2; id <= last; id++ {
		e.send(promptLine(id, false))
	}
	e.sync()
	h.release <- struct{}{}
}

// awaitResponses reads until n responses have come.
func awaitResponses(e *editor, n int) {
	for answered := 0; answered < n; {
		if m := e.recvMsg(); m.IsResponse() {
			answered++
		}
	}
}

// failedPrompt reads until the answer to prompt id, which must be an error
// naming the crashed proxy.
func failedPrompt(t *testing.T, e *editor, id int, crashed string) {
	t.Helper()
	for {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if string(m.ID) != fmt.Sprint(id) || m.Error == nil || !strings.Contains(string(m.Error), crashed) {
			t.Fatalf("want an error naming %s for prompt %d, got %s", crashed, id, e.seen[len(e.seen)-1])
		}
		return
	}
}

// sync sends a line that is not JSON and waits for its -32700: the client's
// reader has then dispatched every line sent before it.
func (e *editor) sync() {
	e.t.Helper()
	e.send("not json")
	for {
		if m := e.recvMsg(); m.IsResponse() && strings.Contains(string(m.Error), "-32700") {
			return
		}
	}
}

// TestRestartBackoffCrashLoop restarts a proxy that exits at once every time
// it is started again: each restart waits for its back-off (no process
// starts during one), the delays double up to the longest, and when the
// restart limit is spent the chain fails as it did without back-off.
func TestRestartBackoffCrashLoop(t *testing.T) {
	dir := t.TempDir()
	startsFile := filepath.Join(dir, "starts")
	crasher := restartedCrasher(t, dir, "ACP_TEST_CRASH_AFTER_FIRST="+filepath.Join(dir, "ran"), "ACP_TEST_STARTS="+startsFile)
	core, logs := observer.New(zap.InfoLevel)
	cfg := Config{
		Proxies:           []Component{crasher},
		Agent:             fake(t, dir, "agent", "streamer"),
		RestartLimit:      4,
		RestartBackoff:    100 * time.Millisecond,
		RestartBackoffMax: 300 * time.Millisecond,
		Logger:            zap.New(core),
	}
	h := holdBackoff(&cfg)
	e := startChain(t, cfg)
	initAndCrash(t, e)

	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	for i, w := range want {
		if d := h.next(t); d != w {
			t.Errorf("back-off %d: %v, want %v", i, d, w)
		}
		if n := starts(t, startsFile); n != i+1 {
			t.Errorf("%d starts during back-off %d, want %d", n, i, i+1)
		}
		h.release <- struct{}{}
	}
	// The last restart fails too, and the chain ends by itself.
	var err error
	select {
	case err = <-e.done:
		e.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("the chain did not end when the restart limit was spent")
	}
	if err == nil || !strings.Contains(err.Error(), `"crasher"`) {
		t.Errorf("Run = %v, want the chain to fail naming crasher", err)
	}
	if n := starts(t, startsFile); n != len(want)+1 {
		t.Errorf("%d starts, want %d: the first and %d restarts", n, len(want)+1, len(want))
	}
	if len(h.delays) != 0 {
		t.Errorf("%d back-offs past the restart limit", len(h.delays))
	}
	var logged []time.Duration
	for _, en := range logs.FilterMessage("restarting component").All() {
		logged = append(logged, en.ContextMap()["backoff"].(time.Duration))
	}
	if fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("logged back-offs %v, want %v", logged, want)
	}
	if logs.FilterMessage("not restarting").FilterFieldKey("error").Len() != 1 {
		t.Errorf("the spent restart limit is not logged once: %v", logs.FilterMessage("not restarting").All())
	}
}

// TestRestartBackoffQueues sends prompts while a crashed proxy waits out its
// back-off: they queue, nothing starts until the wait is over, and then
// the restarted proxy gets its replayed initialization first, and the
// prompts only once it has answered that (a naive proxy, which takes the
// line after an initialize it passed on for its answer, would die of a
// prompt there), and answers every one of them.
func TestRestartBackoffQueues(t *testing.T) {
	dir := t.TempDir()
	startsFile := filepath.Join(dir, "starts")
	crasher := restartedCrasher(t, dir, "ACP_TEST_STARTS="+startsFile, "ACP_TEST_NAIVE_INIT=1")
	cfg := Config{
		Proxies: []Component{fake(t, dir, "first", "proxy"), crasher},
		Agent:   fake(t, dir, "agent", "streamer"),
	}
	h := holdBackoff(&cfg)
	e := startChain(t, cfg)
	initAndCrash(t, e)
	if d := h.next(t); d != DefaultRestartBackoff {
		t.Errorf("first back-off %v, want %v", d, DefaultRestartBackoff)
	}
	for id := 2; id <= 5; id++ {
		e.send(promptLine(id, false))
	}
	e.sync()
	if n := starts(t, startsFile); n != 1 {
		t.Fatalf("%d starts before the back-off ended, want 1", n)
	}
	h.release <- struct{}{}
	answered := map[string]bool{}
	for len(answered) < 4 {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if m.Error != nil {
			t.Errorf("prompt %s, sent during the back-off, failed: %s", m.ID, m.Error)
		}
		answered[string(m.ID)] = true
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := starts(t, startsFile); n != 2 {
		t.Errorf("%d starts, want 2", n)
	}
	// The new process saw the replayed initialization, the answer to the
	// initialize it passed on, and only then the prompts.
	if want := "[init answer prompt init answer prompt prompt prompt prompt]"; fmt.Sprint(initOrder(t, dir)) != want {
		t.Errorf("the proxy's processes saw %v, want %s", initOrder(t, dir), want)
	}
	// The prompts that waited went on in the order they came.
	saw, _ := os.ReadFile(filepath.Join(dir, "crasher.txt"))
	var tags []string
	for l := range strings.SplitSeq(string(saw), "\n") {
		if i := strings.Index(l, `"tag":"t`); i >= 0 && strings.Contains(l, `"method":"session/prompt"`) {
			tags = append(tags, l[i+7:i+9])
		}
	}
	if want := "[t1 t2 t3 t4 t5]"; fmt.Sprint(tags) != want {
		t.Errorf("the proxy's processes saw the prompts %v, want %s", tags, want)
	}
}

// initOrder returns what the crasher's processes received, in order, as
// "init" (a proxy/initialize), "answer" (the answer to the initialize it
// passed on) and "prompt".
func initOrder(t *testing.T, dir string) []string {
	t.Helper()
	saw, _ := os.ReadFile(filepath.Join(dir, "crasher.txt"))
	var order []string
	for l := range strings.SplitSeq(string(saw), "\n") {
		switch {
		case strings.Contains(l, `"method":"proxy/initialize"`):
			order = append(order, "init")
		case strings.Contains(l, `"result":{"protocolVersion"`):
			order = append(order, "answer")
		case strings.Contains(l, `"method":"session/prompt"`):
			order = append(order, "prompt")
		}
	}
	return order
}

// TestRestartRefusedReplayFailsQueued has a restarted proxy refuse its
// replayed initialize: what queued for it meanwhile is never sent to it,
// nor left waiting, but fails with an error that says so.
func TestRestartRefusedReplayFailsQueued(t *testing.T) {
	dir := t.TempDir()
	crasher := restartedCrasher(t, dir, "ACP_TEST_REFUSE_AFTER_FIRST="+filepath.Join(dir, "ran"))
	cfg := Config{
		Proxies:      []Component{crasher},
		Agent:        fake(t, dir, "agent", "streamer"),
		RestartLimit: 1,
	}
	h := holdBackoff(&cfg)
	e := startChain(t, cfg)
	initAndCrash(t, e)
	promptsInBackoff(t, e, h, 3)
	for answered := 0; answered < 2; {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		answered++
		if m.Error == nil || !strings.Contains(string(m.Error), `refused the replayed initialize: refuser takes nothing`) {
			t.Errorf("prompt %s, queued for the restart, got %s; want an error saying the replay was refused", m.ID, e.seen[len(e.seen)-1])
		}
	}
	if err := e.close(); err == nil || !strings.Contains(err.Error(), "refused the replayed initialize") {
		t.Errorf("Run: %v, want the refusal", err)
	}
	if order := initOrder(t, dir); fmt.Sprint(order) != "[init answer prompt init]" {
		t.Errorf("the proxy's processes saw %v: a prompt went to the one that refused its initialize", order)
	}
}

// TestRestartBackoffFlow sends more than an outbox may hold to a proxy that
// waits out its back-off: what queues for it is bounded like any outbox
// (the editor's reader pauses, naming the proxy), and nothing is lost: the
// restarted proxy answers it all.
func TestRestartBackoffFlow(t *testing.T) {
	dir := t.TempDir()
	crasher := restartedCrasher(t, dir)
	core, logs := observer.New(zap.DebugLevel)
	paused := make(chan struct{}, 1)
	cfg := Config{
		Proxies: []Component{crasher},
		Agent:   fake(t, dir, "agent", "streamer"),
		Logger: zap.New(core, zap.Hooks(func(en zapcore.Entry) error {
			if en.Message == "paused reading: a peer's queue is full" {
				select {
				case paused <- struct{}{}:
				default:
				}
			}
			return nil
		})),
	}
	h := holdBackoff(&cfg)
	e := startChain(t, cfg)
	initAndCrash(t, e)
	h.next(t)
	const n = 6 // of 1 MiB: past the outbox's bound
	fill := strings.Repeat("x", 1<<20)
	sent := make(chan error, 1)
	go func() {
		for id := 2; id < 2+n; id++ {
			if err := e.ch.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s","prompt":[],"_meta":{"tag":"t%d","fill":%q}}}`, id, id, fill)); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case <-paused:
	case <-time.After(20 * time.Second):
		t.Fatal("the editor's reader never paused for the proxy's queue")
	}
	if logs.FilterMessage("paused reading: a peer's queue is full").FilterField(zap.String("full", "crasher")).Len() == 0 {
		t.Errorf("paused for another queue than the proxy's: %v", logs.FilterMessage("paused reading: a peer's queue is full").All())
	}
	h.release <- struct{}{}
	for got := 0; got < n; {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if m.Error != nil {
			t.Errorf("prompt %s failed: %s", m.ID, m.Error)
		}
		got++
	}
	if err := <-sent; err != nil {
		t.Errorf("send: %v", err)
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestRestartBackoffShutdown ends the chain while a crashed proxy waits out
// a back-off of an hour: the prompt queued for it is answered at once with
// an error naming it, and Run returns on the shutdown's own schedule
// (checkShutdown), which the back-off does not stretch, with every process
// gone.
func TestRestartBackoffShutdown(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_BACKOFF=%d", rand.Int64())
	dir := t.TempDir()
	crasher := restartedCrasher(t, dir, marker)
	const grace = time.Second
	core, logs := observer.New(zap.DebugLevel)
	e := startChain(t, Config{
		Proxies:        []Component{fake(t, dir, "first", "proxy", marker), crasher},
		Agent:          fake(t, dir, "agent", "streamer", marker),
		RestartBackoff: time.Hour,
		GracePeriod:    grace,
		Logger:         zap.New(core),
	})
	initAndCrash(t, e)
	e.send(promptLine(2, false))
	e.sync()
	start := time.Now()
	e.in.Close()
	for {
		m := e.recvMsg()
		if !m.IsResponse() {
			continue
		}
		if string(m.ID) != "2" || m.Error == nil || !strings.Contains(string(m.Error), "crasher") || !strings.Contains(string(m.Error), errStopped.Error()) {
			t.Errorf("the prompt queued during the back-off was answered %s", e.seen[len(e.seen)-1])
		}
		break
	}
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
	// The components left exit at the end of their input: they are reaped
	// before Run returns. On a loaded machine they may take longer than
	// the grace period, and be signalled; a kill then lands a moment later.
	if sigs := checkShutdown(t, logs, start, time.Now(), grace); len(sigs) == 0 {
		if left := markedProcesses(t, marker); len(left) > 0 {
			t.Errorf("processes left when Run returned: %v", left)
		}
	} else if left := goneSoon(t, marker); len(left) > 0 {
		t.Errorf("signalled %v, and processes left %v after Run returned: %v", sigs, lateness, left)
	}
}

// TestRestartBackoffShutdownFirst ends the chain while the first proxy,
// crashed, waits out its back-off: startAfter answers the prompt queued
// for it, on a goroutine the shutdown does not wait for, so the client
// must not look idle to the drain until that answer is queued, or its
// output could close first and the editor never hear. The hook on the
// prompt's call (see owedPrompt) runs between its being taken off the
// client's requests and its answer being queued; if the drain sees the
// client idle there, the hook lets the shutdown end first, as a slow
// goroutine could.
func TestRestartBackoffShutdownFirst(t *testing.T) {
	owedPrompt(t, Config{}, func(logs *logWatch, client *peer) {
		client.mu.Lock()
		idle := client.refusing != nil && client.idle == nil // the drain's channel is closed
		client.mu.Unlock()
		if idle {
			logs.waitFor("stopped:") // logged once the client's output is closed
		}
	})
}

// TestRestartBackoffOwedCutShort is TestRestartBackoffShutdownFirst with
// a drain that does not end because the client went idle: the answer to
// the prompt queued during the back-off is owed (taken off the client's
// requests, not queued yet) until the drain has ended on Abort, or at its
// deadline, and abandonAll, which answers only the requests still in
// flight, has passed it by. The answer must still reach the editor before
// its output ends. The hook on the prompt's call holds the answer until
// the shutdown waits for it, or, should it not, until the client's output
// is closed.
func TestRestartBackoffOwedCutShort(t *testing.T) {
	for _, how := range []string{"abort", "deadline"} {
		t.Run(how, func(t *testing.T) {
			abort := make(chan struct{})
			grace := time.Hour // the drain ends on Abort
			if how == "deadline" {
				grace = 200 * time.Millisecond // the drain, held by the hook, ends at its deadline
			}
			logs := owedPrompt(t, Config{GracePeriod: grace, Abort: abort}, func(logs *logWatch, _ *peer) {
				// The drain watches the client (restartWait), which owes
				// this answer until the hook returns.
				if how == "abort" {
					close(abort)
				}
				logs.waitFor("answers the conductor owes the client", "stopped:")
			})
			if len(logs.logged("stopping at once")) > 0 != (how == "abort") {
				t.Errorf("the drain did not end by %s", how)
			}
		})
	}
}

// owedPrompt plays the scene of the two tests above, in a chain run with
// cfg: the first proxy crashes, and its restart's back-off lasts until the
// drain watches the client; prompt 2, queued for it meanwhile, is answered
// by startAfter, and hold runs in the hook of its call, between the call's
// being taken off the client's requests and its answer being queued. The
// editor's input is then closed, and the prompt's answer, an error naming
// the crasher and the stop, must reach the editor before its output ends,
// and Run return nil. It returns the chain's logs.
func owedPrompt(t *testing.T, cfg Config, hold func(logs *logWatch, client *peer)) *logWatch {
	t.Helper()
	dir := t.TempDir()
	log, logs := watchLogs(t)
	began := make(chan struct{}, 1)
	var ch *chain
	cfg.Proxies = []Component{restartedCrasher(t, dir)}
	cfg.Agent = fake(t, dir, "agent", "streamer")
	cfg.Logger = log
	cfg.restartWait = func(_ time.Duration, stop <-chan struct{}) bool {
		began <- struct{}{}
		<-stop
		logs.waitFor("draining: the client's new requests are refused")
		return false
	}
	cfg.running = func(c *chain) { ch = c }
	e := startChain(t, cfg)
	initAndCrash(t, e)
	select {
	case <-began:
	case <-time.After(20 * time.Second):
		t.Fatal("no restart back-off began")
	}
	e.send(promptLine(2, false))
	e.sync() // the prompt is pending on the crasher's next process

	client, crasher := ch.peers[0], ch.peers[1]
	crasher.mu.Lock()
	var prompt *call
	for _, c := range crasher.calls {
		if c.from == client && string(c.fromID) == "2" {
			prompt = c
		}
	}
	if prompt == nil {
		crasher.mu.Unlock()
		t.Fatal("the prompt is not pending on the crasher")
	}
	own := prompt.onResponse
	prompt.onResponse = func(m *wire.Message) bool {
		hold(logs, client)
		return own != nil && own(m)
	}
	crasher.mu.Unlock()

	e.in.Close()
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		for {
			l, err := e.ch.Recv()
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	answered := false
	for read := true; read; {
		select {
		case l, ok := <-lines:
			if !ok {
				read = false
				break
			}
			m, err := wire.Parse(l)
			if err != nil || !m.IsResponse() || string(m.ID) != "2" {
				continue
			}
			answered = true
			if m.Error == nil || !strings.Contains(string(m.Error), "crasher") || !strings.Contains(string(m.Error), errStopped.Error()) {
				t.Errorf("the prompt queued during the back-off was answered %s", l)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the conductor's output never ended")
		}
	}
	if !answered {
		t.Error("the prompt queued during the back-off got no answer before the client's output ended")
	}
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
	return logs
}

// TestRestartReplacedAbort restarts a proxy whose first process closes
// its output and then lingers, deaf to the end of its input. The shutdown
// is told to stop at once (Abort): the replaced process is signalled with
// the chain's components, not left to wait out its own grace period, an
// hour here, which Run would wait for, and the shutdown's outcome names
// it. Run returns well within the bound of editor.close, and every
// process is gone.
func TestRestartReplacedAbort(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_LINGER=%d", rand.Int64())
	dir := t.TempDir()
	proxy := fake(t, dir, "proxy", "proxy", marker)
	proxy.OnFailure = PolicyRestart
	// The first start leaves its pid, closes its output and sleeps; the
	// next runs the fake proxy.
	ran := filepath.Join(dir, "ran")
	proxy.Args = []string{"-c", `if [ -e "$1" ]; then exec "$0"; fi; echo $$ >"$1"; exec >&-; exec sleep 3600`, proxy.Command, ran}
	proxy.Command = "sh"
	log, logs := watchLogs(t)
	abort := make(chan struct{})
	e := startChain(t, Config{
		Proxies:        []Component{proxy},
		Agent:          fake(t, dir, "agent", "streamer", marker),
		GracePeriod:    time.Hour,
		RestartBackoff: time.Millisecond,
		Abort:          abort,
		Logger:         log,
	})
	logs.wait(t, "restarted component")
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil {
		t.Fatalf("initialize failed: %s", m.Error)
	}
	if left := markedProcesses(t, marker); len(left) != 3 {
		t.Fatalf("processes running: %v, want the replaced proxy's, its successor's and the agent", left)
	}
	mark, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	firstPID, err := strconv.Atoi(strings.TrimSpace(string(mark)))
	if err != nil {
		t.Fatal(err)
	}
	close(abort)
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if left := goneSoon(t, marker); len(left) > 0 {
		t.Errorf("processes left after Run returned: %v", left)
	}
	named := fmt.Sprintf("proxy (replaced, pid %d) was still running when the conductor was told to stop at once, and was stopped with SIGTERM", firstPID)
	if outcome := logs.logged("stopped:"); len(outcome) != 1 || !strings.Contains(outcome[0], named) {
		t.Errorf("the shutdown's outcome is %q, want it to say %q", outcome, named)
	}
}

// TestBypassedLingererNamedOnce bypasses a proxy that closes its output
// and then lingers, deaf to the end of its input, and stops the chain at
// once. The bypassed process is both the component's and a retired one:
// the shutdown's outcome names it once, by the component's name, not a
// second time as a replaced process.
func TestBypassedLingererNamedOnce(t *testing.T) {
	marker := fmt.Sprintf("ACP_TEST_LINGER=%d", rand.Int64())
	dir := t.TempDir()
	proxy := fake(t, dir, "proxy", "proxy", marker)
	proxy.OnFailure = PolicyBypass
	proxy.Command, proxy.Args = "sh", []string{"-c", `exec >&-; exec sleep 3600`}
	log, logs := watchLogs(t)
	abort := make(chan struct{})
	e := startChain(t, Config{
		Proxies:     []Component{proxy},
		Agent:       fake(t, dir, "agent", "agent", marker),
		GracePeriod: time.Hour,
		Abort:       abort,
		Logger:      log,
	})
	logs.wait(t, "BYPASSED component")
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil {
		t.Fatalf("initialize failed: %s", m.Error)
	}
	close(abort)
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if left := goneSoon(t, marker); len(left) > 0 {
		t.Errorf("processes left after Run returned: %v", left)
	}
	outcome := logs.logged("stopped:")
	named := "proxy was still running when the conductor was told to stop at once, and was stopped with SIGTERM"
	if len(outcome) != 1 || !strings.Contains(outcome[0], named) || strings.Count(outcome[0], "proxy") != 1 {
		t.Errorf("the shutdown's outcome is %q, want it to say %q, and name the proxy once", outcome, named)
	}
}

// TestReplacedKilledInShutdownWindow: a proxy's process fails and lingers,
// deaf to SIGTERM, once replaced; its own stop sends it SIGTERM after the
// grace period (logged), and then the chain is stopped at once. The
// shutdown's SIGTERM does not end it, and neither may the replaced
// process's own SIGKILL inside the shutdown's SIGTERM window: it is
// killed by the shutdown's SIGKILL, and the outcome says so, not SIGTERM.
func TestReplacedKilledInShutdownWindow(t *testing.T) {
	dir := t.TempDir()
	lingered := filepath.Join(dir, "lingered")
	proxy := fake(t, dir, "proxy", "proxy", "ACP_TEST_LINGER_FIRST="+lingered, "ACP_TEST_STARTS="+filepath.Join(dir, "starts"))
	proxy.OnFailure = PolicyRestart
	log, logs := watchLogs(t)
	abort := make(chan struct{})
	e := startChain(t, Config{
		Proxies:        []Component{proxy},
		Agent:          fake(t, dir, "agent", "streamer"),
		GracePeriod:    50 * time.Millisecond,
		RestartBackoff: time.Millisecond,
		Abort:          abort,
		Logger:         log,
	})
	logs.wait(t, "restarted component")
	e.send(initLine)
	if m := e.recvMsg(); m.Error != nil {
		t.Fatalf("initialize failed: %s", m.Error)
	}
	// Its own stop's SIGTERM, noted by the process itself.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(lingered); bytes.Count(b, []byte("TERM")) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replaced process never got its own stop's SIGTERM")
		}
	}
	close(abort)
	if err := e.close(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if got := logs.logged("replaced process did not exit within the grace period"); len(got) != 1 {
		t.Errorf("logged %q, want the replaced process's own SIGTERM, once", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "starts"))
	firstPID := strings.Fields(string(b))[0]
	outcome := logs.logged("stopped:")
	named := fmt.Sprintf("proxy (replaced, pid %s) was still running when the conductor was told to stop at once, and was killed with SIGKILL when it did not exit on SIGTERM", firstPID)
	if len(outcome) != 1 || !strings.Contains(outcome[0], named) {
		t.Errorf("the shutdown's outcome is %q, want it to say %q", outcome, named)
	}
}
