package transcriptrecorder_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/examples/proxies/internal/chaintest"
)

func TestMain(m *testing.M) { os.Exit(chaintest.Main(m)) }

// An entry is one line of a transcript.
type entry struct {
	Time      string `json:"time"`
	Direction string `json:"direction"`
	Message   struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	} `json:"message"`
}

// TestChain puts two recorders in a row between the SDK client and the SDK
// agent, the first configured by environment and the second by flag, and
// holds a conversation covering streamed updates, a permission request and a
// file read from the agent, and a prompt cancelled with session/cancel. The
// client checks that everything arrived, in order. The transcripts must
// account for every message the client received, pair every request with
// its answer by id, and be the same in both recorders but for ids: what the
// first passed on reached the second byte for byte.
func TestChain(t *testing.T) {
	env := chaintest.Setup(t)
	ctx := chaintest.Context(t)
	recorder, err := filepath.Abs("transcript-recorder.mjs")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.jsonl"), filepath.Join(dir, "second.jsonl")
	cfg := chaintest.ClientConfig{
		Prompts:      []string{"héllo <b>&amp;</b> \u2028 ✓", "ask for permission", "readfile:/virtual/notes.txt"},
		Files:        map[string]string{"/virtual/notes.txt": "notes"},
		CancelPrompt: "hang until cancelled",
	}
	s := env.RunClient(t, ctx, cfg, env.AgentMode(
		"ACP_TRANSCRIPT="+chaintest.Quote(first)+" "+chaintest.Quote(env.Node, recorder),
		chaintest.Quote(env.Node, recorder, "--out", second),
		env.AgentCmd("agent"),
	)...)

	a, b := readTranscript(t, first), readTranscript(t, second)
	for name, tr := range map[string][]entry{"first": a, "second": b} {
		checkPairs(t, name, tr)
	}

	// Everything the client received passed the first recorder, once.
	if got := count(a, "to_client"); got != s.WireMessages {
		t.Errorf("first transcript has %d messages to the client; the client received %d", got, s.WireMessages)
	}
	if a[0].Direction != "to_agent" || a[0].Message.Method != "proxy/initialize" {
		t.Errorf("first entry is %s %s, want to_agent proxy/initialize", a[0].Direction, a[0].Message.Method)
	}
	var sawPermission bool
	for _, e := range a {
		if e.Direction == "to_client" && e.Message.Method == "session/request_permission" {
			sawPermission = true
		}
	}
	if !sawPermission {
		t.Error("first transcript has no session/request_permission")
	}

	// Both recorders saw the same messages in the same order, each way.
	for _, dir := range []string{"to_agent", "to_client"} {
		x, y := content(a, dir), content(b, dir)
		if len(x) != len(y) {
			t.Errorf("%s: first recorder saw %d messages, second %d", dir, len(x), len(y))
			continue
		}
		for i := range x {
			if x[i] != y[i] {
				t.Errorf("%s message %d differs:\nfirst:  %s\nsecond: %s", dir, i, x[i], y[i])
			}
		}
	}
}

func readTranscript(t *testing.T, path string) []entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tr []entry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var e entry
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%s:%d: %v: %s", path, n, err, sc.Bytes())
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
			t.Errorf("%s:%d: time: %v", path, n, err)
		}
		if e.Direction != "to_agent" && e.Direction != "to_client" {
			t.Errorf("%s:%d: direction %q", path, n, e.Direction)
		}
		if e.Message.JSONRPC != "2.0" {
			t.Errorf("%s:%d: not a JSON-RPC 2.0 message: %s", path, n, sc.Bytes())
		}
		tr = append(tr, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tr) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return tr
}

// checkPairs checks that every request in a transcript has exactly one
// answer, going the other way under the same id, after it.
func checkPairs(t *testing.T, name string, tr []entry) {
	t.Helper()
	open := make(map[string]bool) // direction and id of requests not yet answered
	for i, e := range tr {
		m := e.Message
		switch {
		case m.ID == nil: // a notification
		case m.Method != "":
			key := e.Direction + " " + string(m.ID)
			if open[key] {
				t.Errorf("%s entry %d: id %s reused while in flight", name, i, m.ID)
			}
			open[key] = true
		default:
			key := other(e.Direction) + " " + string(m.ID)
			if !open[key] {
				t.Errorf("%s entry %d: answer %s %s to no request", name, i, e.Direction, m.ID)
			}
			delete(open, key)
		}
	}
	for key := range open {
		t.Errorf("%s: request %s never answered", name, key)
	}
}

func other(dir string) string {
	if dir == "to_agent" {
		return "to_client"
	}
	return "to_agent"
}

func count(tr []entry, dir string) int {
	n := 0
	for _, e := range tr {
		if e.Direction == dir {
			n++
		}
	}
	return n
}

// content returns what the messages going one way said, leaving out their
// ids, which are different on every hop.
func content(tr []entry, dir string) []string {
	var out []string
	for _, e := range tr {
		if e.Direction == dir {
			m := e.Message
			out = append(out, fmt.Sprintf("%s params=%s result=%s error=%s", m.Method, m.Params, m.Result, m.Error))
		}
	}
	return out
}

// TestCancelKeepsMeta: a $/cancel_request the recorder passes on names the
// request by the recorder's own id, and keeps everything else it carried
// (_meta with W3C trace context, members the recorder does not know), for
// a request from either side.
func TestCancelKeepsMeta(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (>= 20) is required: %v", err)
	}
	cmd := exec.Command(node, "transcript-recorder.mjs", "--out", filepath.Join(t.TempDir(), "t.jsonl"))
	chaintest.CancelKeepsMeta(t, cmd)
}

// TestTopLevelMembersPass: members of a message that JSON-RPC does not
// define go on with it, wrapped or unwrapped, as the README asks of a proxy.
func TestTopLevelMembersPass(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (>= 20) is required: %v", err)
	}
	cmd := exec.Command(node, "transcript-recorder.mjs", "--out", filepath.Join(t.TempDir(), "t.jsonl"))
	chaintest.TopLevelMembersPass(t, cmd)
}

// TestUsage: a mistake on the command line stops the recorder with exit
// status 2, naming the mistake on stderr and writing nothing on stdout,
// which is the protocol's; --help is no mistake.
func TestUsage(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (>= 20) is required: %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "no transcript file: give --out FILE or set ACP_TRANSCRIPT"},
		{[]string{"--outt", "x.jsonl"}, 2, `unknown argument "--outt"`},
		{[]string{"--out"}, 2, "--out needs a FILE"},
		{[]string{"--help"}, 0, "usage: transcript-recorder.mjs --out FILE"},
	} {
		cmd := exec.Command(node, append([]string{"transcript-recorder.mjs"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "ACP_TRANSCRIPT=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != tc.code || stdout.Len() > 0 || !bytes.Contains(stderr.Bytes(), []byte(tc.want)) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, nothing and %q", tc.args, code, stdout.Bytes(), stderr.Bytes(), tc.code, tc.want)
		}
	}
}
