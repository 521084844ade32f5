package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/trick"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// clientFlags are the knobs of every scenario.
type clientFlags struct {
	scenario string
	warmup   int // prompts before measuring (stream)
	latency  int // prompts with no updates, timed one by one (stream)
	tp3      int // prompts with 3 updates each (stream)
	tp100    int // prompts with 100 updates each (stream)
	bytes    int // prompt text size (big)
	sessions int // concurrent sessions (concurrent)
	prompts  int // prompts per session (concurrent)
	updates  int // updates per prompt (concurrent)
	repeat   int // launches (startup)
	settle   time.Duration
	timeout  time.Duration
	disable  string // platform tricks the child goes without (internal/trick)
}

// runClient plays the editor for one scenario against the command after
// "--" and prints the result as one line of JSON.
func runClient(args []string) error {
	var f clientFlags
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.StringVar(&f.scenario, "scenario", "stream", "stream, big, concurrent or startup")
	fs.IntVar(&f.warmup, "warmup", 200, "")
	fs.IntVar(&f.latency, "latency", 2000, "")
	fs.IntVar(&f.tp3, "tp3", 2000, "")
	fs.IntVar(&f.tp100, "tp100", 200, "")
	fs.IntVar(&f.bytes, "bytes", 16<<20, "")
	fs.IntVar(&f.sessions, "sessions", 200, "")
	fs.IntVar(&f.prompts, "prompts", 20, "")
	fs.IntVar(&f.updates, "updates", 3, "")
	fs.IntVar(&f.repeat, "repeat", 10, "")
	fs.DurationVar(&f.settle, "settle", 300*time.Millisecond, "")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "")
	fs.StringVar(&f.disable, "disable", "", "tricks the child goes without, for "+trick.Env)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.disable != "" {
		childEnv = append(childEnv, trick.Env+"="+f.disable)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return errors.New("no command to launch")
	}
	var res any
	var err error
	switch f.scenario {
	case "stream":
		res, err = streamScenario(f, argv)
	case "big":
		res, err = bigScenario(f, argv)
	case "concurrent":
		res, err = concurrentScenario(f, argv)
	case "startup":
		res, err = startupScenario(f, argv)
	default:
		err = fmt.Errorf("unknown scenario %q", f.scenario)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

const initLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}}` + "\n"

func newSessionLine(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}` + "\n")
}

// appendPrompt appends a session/prompt request whose id is also its tag.
func appendPrompt(buf []byte, id int, session []byte, updates int, text string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"method":"session/prompt","params":{"sessionId":`...)
	buf = append(buf, session...)
	buf = append(buf, `,"prompt":[{"type":"text","text":"`...)
	buf = append(buf, text...)
	buf = append(buf, `"}],"_meta":{"updates":`...)
	buf = strconv.AppendInt(buf, int64(updates), 10)
	buf = append(buf, `,"tag":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	return append(buf, "}}}\n"...)
}

// updateMeta returns the session, tag and seq of a bench session/update.
func updateMeta(params []byte) (session []byte, tag, seq int) {
	tag, seq = -1, -1
	wire.EachField(params, func(key, val []byte) {
		switch string(key) {
		case `"sessionId"`:
			session = val
		case `"_meta"`:
			wire.EachField(val, func(key, val []byte) {
				switch string(key) {
				case `"tag"`:
					tag, _ = strconv.Atoi(string(val))
				case `"seq"`:
					seq, _ = strconv.Atoi(string(val))
				}
			})
		}
	})
	return session, tag, seq
}

// open launches argv, initializes it and opens n sessions, returning their
// ids as raw JSON strings.
func open(argv []string, n int) (*child, [][]byte, error) {
	c, err := launch(argv)
	if err != nil {
		return nil, nil, err
	}
	if _, err := c.call([]byte(initLine)); err != nil {
		c.finish()
		return nil, nil, fmt.Errorf("initialize: %w", err)
	}
	var sessions [][]byte
	for i := range n {
		m, err := c.call(newSessionLine(i + 1))
		if err != nil {
			c.finish()
			return nil, nil, fmt.Errorf("session/new: %w", err)
		}
		var sid []byte
		wire.EachField(m.Result, func(key, val []byte) {
			if string(key) == `"sessionId"` {
				sid = val
			}
		})
		sessions = append(sessions, sid)
	}
	return c, sessions, nil
}

// turn sends one prompt and reads its updates and answer, checking that
// every update belongs to it and that they arrive in order before the answer.
func turn(c *child, buf []byte, id int, session []byte, updates int, text string) ([]byte, error) {
	buf = appendPrompt(buf[:0], id, session, updates, text)
	if err := c.send(buf); err != nil {
		return buf, err
	}
	want := 0
	for {
		m, err := c.recv()
		if err != nil {
			return buf, err
		}
		switch {
		case m.Method == "session/update":
			_, tag, seq := updateMeta(m.Params)
			if tag != id || seq != want {
				return buf, fmt.Errorf("prompt %d: update %d/%d arrived as update %d", id, tag, seq, want)
			}
			want++
		case m.IsResponse():
			if string(m.ID) != strconv.Itoa(id) || m.Error != nil {
				return buf, fmt.Errorf("prompt %d: answer %s", id, m.Bytes())
			}
			if want != updates {
				return buf, fmt.Errorf("prompt %d: %d updates before the answer, want %d", id, want, updates)
			}
			return buf, nil
		default:
			return buf, fmt.Errorf("prompt %d: unexpected %s", id, m.Bytes())
		}
	}
}

// A Throughput is what one timed phase of prompts achieved.
type Throughput struct {
	Prompts        int     `json:"prompts"`
	Updates        int     `json:"updates"`
	Seconds        float64 `json:"seconds"`
	UpdatesPerSec  float64 `json:"updatesPerSec"`
	PromptsPerSec  float64 `json:"promptsPerSec"`
	MessagesPerSec float64 `json:"messagesPerSec"` // updates and answers
}

func throughput(prompts, updates int, d time.Duration) Throughput {
	s := d.Seconds()
	if prompts == 0 || s == 0 {
		return Throughput{}
	}
	return Throughput{Prompts: prompts, Updates: updates, Seconds: s,
		UpdatesPerSec: float64(updates) / s, PromptsPerSec: float64(prompts) / s,
		MessagesPerSec: float64(updates+prompts) / s}
}

// StreamResult is the result of the stream scenario.
type StreamResult struct {
	LatencyMedianNs int64      `json:"latencyMedianNs"`
	LatencyP99Ns    int64      `json:"latencyP99Ns"`
	TP3             Throughput `json:"tp3"`
	TP100           Throughput `json:"tp100"`
	// What the child process itself (the conductor, a relay, or the agent
	// when direct) spent, which the machine's load does not change as it
	// changes latency: CPU time and voluntary context switches (sleeps,
	// hence wake-ups) per round trip of the latency phase, and CPU time per
	// update of the 100-update phase.
	LatencyCPUNs    float64 `json:"latencyCpuNs"`
	LatencySwitches float64 `json:"latencySwitches"`
	TP100CPUNs      float64 `json:"tp100CpuNs"`
}

// streamScenario: one session, prompts one after another. First warm-up
// prompts (with 3 updates, then with 100), then prompts with no updates timed one by one (round-trip
// latency), then prompts with 3 and with 100 updates timed as a whole
// (throughput).
func streamScenario(f clientFlags, argv []string) (*StreamResult, error) {
	c, sessions, err := open(argv, 1)
	if err != nil {
		return nil, err
	}
	defer c.watchdog(f.timeout)()
	s := sessions[0]
	var buf []byte
	id := 100
	next := func() int { id++; return id }
	// Warm up with both kinds of prompt measured below, so that what a
	// process pays once (its heap's first growth: page faults, which cost
	// 16-19 µs each on the development VM) is paid before measuring, not
	// inside the streaming window.
	for _, updates := range []int{3, 100} {
		for range f.warmup {
			if buf, err = turn(c, buf, next(), s, updates, "warm up"); err != nil {
				return nil, err
			}
		}
	}
	res := new(StreamResult)
	lat := make([]time.Duration, 0, f.latency)
	before := usage(c.pid())
	for range f.latency {
		t := time.Now()
		if buf, err = turn(c, buf, next(), s, 0, "ping"); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.LatencyMedianNs = int64(lat[len(lat)/2])
		res.LatencyP99Ns = int64(lat[min(len(lat)-1, len(lat)*99/100)])
		d := usage(c.pid()).sub(before)
		res.LatencyCPUNs = float64(d.cpuNs) / float64(len(lat))
		res.LatencySwitches = float64(d.switches) / float64(len(lat))
	}

	phase := func(n, updates int) (Throughput, error) {
		t := time.Now()
		for range n {
			if buf, err = turn(c, buf, next(), s, updates, "stream"); err != nil {
				return Throughput{}, err
			}
		}
		return throughput(n, n*updates, time.Since(t)), nil
	}
	if res.TP3, err = phase(f.tp3, 3); err != nil {
		return nil, err
	}
	before = usage(c.pid())
	if res.TP100, err = phase(f.tp100, 100); err != nil {
		return nil, err
	}
	if res.TP100.Updates > 0 {
		res.TP100CPUNs = float64(usage(c.pid()).sub(before).cpuNs) / float64(res.TP100.Updates)
	}
	return res, c.finish()
}

// BigResult is the result of the big scenario.
type BigResult struct {
	PayloadBytes int     `json:"payloadBytes"`
	Seconds      float64 `json:"seconds"`
	HWMBefore    int64   `json:"hwmBefore"` // the child's VmHWM once initialized
	HWM          int64   `json:"hwm"`       // and after the big prompt's answer
}

// bigScenario sends one prompt whose text is f.bytes long and times it to
// its answer, then reads the child's peak RSS.
func bigScenario(f clientFlags, argv []string) (*BigResult, error) {
	c, sessions, err := open(argv, 1)
	if err != nil {
		return nil, err
	}
	defer c.watchdog(f.timeout)()
	res := &BigResult{PayloadBytes: f.bytes}
	if res.HWMBefore, err = procStatus(c.pid(), "VmHWM"); err != nil {
		return nil, err
	}
	text := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", f.bytes/57+1)[:f.bytes]
	buf := make([]byte, 0, len(text)+256)
	t := time.Now()
	if _, err = turn(c, buf, 1000, sessions[0], 0, text); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t).Seconds()
	if res.HWM, err = procStatus(c.pid(), "VmHWM"); err != nil {
		return nil, err
	}
	return res, c.finish()
}

// ConcurrentResult is the result of the concurrent scenario.
type ConcurrentResult struct {
	Sessions   int        `json:"sessions"`
	Errors     int        `json:"errors"`
	FirstError string     `json:"firstError,omitempty"`
	Throughput Throughput `json:"throughput"`
}

// concurrentScenario opens f.sessions sessions and keeps one prompt in
// flight in each until each has had f.prompts prompts answered. Every
// update is checked against its session's prompt and order; an error answer,
// an update out of place, or a wrong count is an error.
func concurrentScenario(f clientFlags, argv []string) (*ConcurrentResult, error) {
	c, sessions, err := open(argv, f.sessions)
	if err != nil {
		return nil, err
	}
	defer c.watchdog(f.timeout)()
	// One writer, so that the reader below never blocks on a full pipe.
	lines := make(chan []byte, f.sessions+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for l := range lines {
			if c.send(l) != nil {
				return
			}
		}
	}()
	type state struct {
		sent, answered int
		prompt         int // id (and tag) of the prompt in flight
		seq            int // updates seen for it
	}
	bySession := make(map[string]int, len(sessions))
	for i, s := range sessions {
		bySession[string(s)] = i
	}
	st := make([]state, len(sessions))
	res := &ConcurrentResult{Sessions: len(sessions)}
	fail := func(format string, args ...any) {
		if res.Errors++; res.FirstError == "" {
			res.FirstError = fmt.Sprintf(format, args...)
		}
	}
	nextID := 1000
	send := func(i int) {
		nextID++
		st[i].sent++
		st[i].prompt, st[i].seq = nextID, 0
		lines <- appendPrompt(nil, nextID, sessions[i], f.updates, "concurrent")
	}
	sessionOf := make(map[int]int) // prompt id -> session
	t := time.Now()
	for i := range sessions {
		send(i)
		sessionOf[nextID] = i
	}
	total, done := len(sessions)*f.prompts, 0
	for done < total {
		m, err := c.recv()
		if err != nil {
			fail("%v", err)
			break
		}
		switch {
		case m.Method == "session/update":
			s, tag, seq := updateMeta(m.Params)
			i, ok := bySession[string(s)]
			if !ok || tag != st[i].prompt || seq != st[i].seq {
				fail("update %s out of place", m.Params)
				continue
			}
			st[i].seq++
		case m.IsResponse():
			id, _ := strconv.Atoi(string(m.ID))
			i, ok := sessionOf[id]
			delete(sessionOf, id)
			done++
			switch {
			case !ok:
				fail("answer to unknown id %s", m.ID)
				continue
			case m.Error != nil:
				fail("error answer %s", m.Error)
			case st[i].seq != f.updates:
				fail("prompt %d: %d updates, want %d", id, st[i].seq, f.updates)
			}
			if st[i].answered++; st[i].sent < f.prompts {
				send(i)
				sessionOf[nextID] = i
			}
		default:
			fail("unexpected %s", m.Bytes())
		}
	}
	res.Throughput = throughput(total, total*f.updates, time.Since(t))
	close(lines)
	wg.Wait()
	if err := c.finish(); err != nil {
		fail("%v", err)
	}
	return res, nil
}

// StartupResult is the result of the startup scenario: medians over the
// launches.
type StartupResult struct {
	InitNs  int64 `json:"initNs"`  // launch to the initialize answer
	IdleRSS int64 `json:"idleRss"` // VmRSS once a session is open and idle
	IdleHWM int64 `json:"idleHwm"`
}

// startupScenario launches argv f.repeat times, timing each from just
// before the launch to the answer to initialize (sent at once), then opens a
// session, lets the process settle and reads its RSS.
func startupScenario(f clientFlags, argv []string) (*StartupResult, error) {
	var inits, rss, hwm []int64
	for range f.repeat {
		t := time.Now()
		c, err := launch(argv)
		if err != nil {
			return nil, err
		}
		stop := c.watchdog(f.timeout)
		if _, err := c.call([]byte(initLine)); err != nil {
			return nil, err
		}
		inits = append(inits, int64(time.Since(t)))
		if _, err := c.call(newSessionLine(1)); err != nil {
			return nil, err
		}
		time.Sleep(f.settle)
		r, err := procStatus(c.pid(), "VmRSS")
		if err != nil {
			return nil, err
		}
		h, err := procStatus(c.pid(), "VmHWM")
		if err != nil {
			return nil, err
		}
		rss, hwm = append(rss, r), append(hwm, h)
		stop()
		if err := c.finish(); err != nil {
			return nil, err
		}
	}
	return &StartupResult{InitNs: median(inits), IdleRSS: median(rss), IdleHWM: median(hwm)}, nil
}

func median(v []int64) int64 {
	slices.Sort(v)
	return v[len(v)/2]
}
