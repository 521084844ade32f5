package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFidelity sends every method the official TypeScript SDK knows, in ACP
// v1 (with the experimental NES methods) and v2, both ways, through the
// conductor with no proxy, with two proxy-library passthroughs, with two
// Node passthroughs and with two of the example Node transcript recorders
// (which change nothing), and checks that each arrives as it was sent: the
// receiving side's params deep-equal to the sender's, _meta and members no
// schema has included, and the answer, result or error (code, message,
// data), deep-equal to what the receiver answered. Each method is answered
// once with a result and once with an error; extension methods (_foo/bar)
// go both ways with params and results of every JSON shape; a
// $/cancel_request carrying _meta and an unknown member cancels a request
// held in flight, each way. What the SDK made of each answer (its typed
// parse, or the error it threw) must be what it made of it with no
// conductor in between.
//
// The cases are built by peers/fidelity_cases.mjs from the SDK's own method
// lists and JSON schema, so a method the SDK adds is sent too; a
// hand-written part of that table that names a method the SDK does not
// list, or an SDK method the table neither sends nor excludes with a
// reason, fails the test. The SDK's typed handler for each method must
// have taken its params.
//
// The only changes allowed are the ones the conductor documents
// (fidelityEdits): the MCP-over-ACP capability in initialize's answer.
func TestFidelity(t *testing.T) {
	requireConductor(t)
	requireLibProxy(t)
	nodePassthrough := filepath.Join(repoRoot, "bench", "node", "passthrough.mjs")
	recorder := filepath.Join(repoRoot, "examples", "proxies", "transcript-recorder", "transcript-recorder.mjs")
	chains := []struct {
		name    string
		proxies func(dir string) []string // nil: the editor spawns the agent itself
	}{
		{"direct", nil},
		{"0 proxies", func(string) []string { return nil }},
		{"2 proxy-library proxies", func(string) []string { return []string{libProxyCmd("lib1"), libProxyCmd("lib2")} }},
		{"2 Node proxies", func(string) []string {
			return []string{shellJoin(nodeBin, nodePassthrough), shellJoin(nodeBin, nodePassthrough)}
		}},
		{"2 transcript recorders", func(dir string) []string {
			return []string{shellJoin(nodeBin, recorder, "--out", filepath.Join(dir, "t1.jsonl")),
				shellJoin(nodeBin, recorder, "--out", filepath.Join(dir, "t2.jsonl"))}
		}},
	}
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			// With no conductor, first: what the SDK makes of each answer
			// there is what it must make of it through any chain.
			var direct *fidelityRun
			for _, c := range chains {
				ok := t.Run(c.name, func(t *testing.T) {
					r := runFidelity(t, version, c.proxies)
					if direct == nil {
						direct = r
						return
					}
					r.checkOutcomes(t, direct)
				})
				if direct == nil && !ok {
					return
				}
			}
		})
	}
}

// fidelityEdits are the changes the conductor makes on purpose to what it
// relays (README, "MCP-over-ACP"), by method: each turns what the receiver
// sent into what the sender must get.
var fidelityEdits = map[string]struct {
	params, result func(version int, v any) any
}{
	// The chain advertises MCP-over-ACP, where the answer's version puts
	// it: agentCapabilities.mcpCapabilities.acp true in v1,
	// capabilities.session.mcp.acp {} in v2 (when capabilities.session is
	// an object).
	"initialize": {result: func(version int, v any) any {
		if version == 1 {
			return setPath(v, true, "agentCapabilities", "mcpCapabilities", "acp")
		}
		if _, ok := getPath(v, "capabilities", "session").(map[string]any); ok {
			return setPath(v, map[string]any{}, "capabilities", "session", "mcp", "acp")
		}
		return v
	}},
}

// A fidelityRun is what one run of peers/fidelity.mjs recorded.
type fidelityRun struct {
	version   int
	conducted bool // a conductor was between them: its edits apply
	summary   struct {
		Version  int               `json:"version"`
		Cases    []fidelityCase    `json:"cases"`
		Excluded map[string]string `json:"excluded"`
		Special  map[string]string `json:"special"`
		Failures []string          `json:"failures"`
	}
	editor, agent *fidelityLog
}

type fidelityCase struct {
	Tag       string `json:"tag"`
	Method    string `json:"method"`
	Side      string `json:"side"` // "agent": the editor sends it; "client": the agent does
	Kind      string `json:"kind"` // "request" or "notification"
	Reply     string `json:"reply"`
	Untagged  bool   `json:"untagged"`
	Extension bool   `json:"extension"`
	NES       bool   `json:"nes"`
}

// A fidelityLog is one side's record (see peers/fidelity.mjs).
type fidelityLog struct {
	name     string
	wire     []wireEntry
	found    map[int]bool // the wire entries find has matched to a case
	handled  map[string]handledEntry
	outcomes map[string]any
}

type wireEntry struct {
	dir string // "in" or "out"
	msg map[string]any
}

type handledEntry struct {
	Method string `json:"method"`
	Kind   string `json:"kind"`
	Typed  bool   `json:"typed"`
}

// runFidelity runs the fidelity editor against the fidelity agent of
// version, through the conductor with proxies (or directly, if proxies is
// nil), and checks every case's crossing.
func runFidelity(t *testing.T, version int, proxies func(dir string) []string) *fidelityRun {
	t.Helper()
	ctx := testContext(t, 120*time.Second)
	dir := t.TempDir()
	fid := filepath.Join(peersDir, "fidelity.mjs")
	v := fmt.Sprint(version)
	agent := []string{nodeBin, fid, "agent", "--version", v, "--record", filepath.Join(dir, "agent.jsonl")}
	argv := append([]string{nodeBin, fid, "client", "--version", v, "--record", filepath.Join(dir, "editor.jsonl"), "--"}, agent...)
	if proxies != nil {
		argv = append(argv[:len(argv)-len(agent)], agentModeArgs(append(proxies(dir), shellJoin(agent...))...)...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = peersDir
	cmd.Env = append(os.Environ(), markerVar+"="+markerChecked(t), "ACP_IT_TIMEOUT_MS="+fmt.Sprint(timeoutMs(ctx, 60*time.Second)))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	r := &fidelityRun{version: version, conducted: proxies != nil}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r.summary); err != nil {
		t.Fatalf("editor output %q: %v (%v)\nstderr:\n%s", stdout.String(), err, runErr, stderr.String())
	}
	r.editor = readFidelityLog(t, "the editor", filepath.Join(dir, "editor.jsonl"))
	r.agent = readFidelityLog(t, "the agent", filepath.Join(dir, "agent.jsonl"))
	for _, f := range r.summary.Failures {
		t.Errorf("editor: %s", f)
	}
	if runErr != nil {
		t.Errorf("editor: %v", runErr)
	}
	r.check(t)
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return r
}

func readFidelityLog(t *testing.T, name, file string) *fidelityLog {
	t.Helper()
	l := &fidelityLog{name: name, found: map[int]bool{}, handled: map[string]handledEntry{}, outcomes: map[string]any{}}
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("%s's record: %v", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Wire    string          `json:"wire"`
			Msg     json.RawMessage `json:"msg"`
			Handled *string         `json:"handled"`
			Outcome *string         `json:"outcome"`
			handledEntry
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s's record: %q: %v", name, sc.Text(), err)
		}
		switch {
		case e.Wire != "":
			var m map[string]any
			if err := decodeJSON(e.Msg, &m); err != nil {
				t.Fatalf("%s's record: %s: %v", name, e.Msg, err)
			}
			l.wire = append(l.wire, wireEntry{e.Wire, m})
		case e.Handled != nil:
			l.handled[*e.Handled] = e.handledEntry
		case e.Outcome != nil:
			var o map[string]any
			decodeJSON(sc.Bytes(), &o)
			delete(o, "outcome")
			l.outcomes[*e.Outcome] = o
		}
	}
	return l
}

// decodeJSON decodes numbers as json.Number, so that comparing values
// compares the numbers as written.
func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// check pairs each case's message as its sender wrote it with the message
// its receiver read, and their answers, and compares them.
func (r *fidelityRun) check(t *testing.T) {
	t.Helper()
	if len(r.summary.Cases) == 0 {
		t.Fatal("the editor ran no case")
	}
	for _, c := range r.summary.Cases {
		sender, receiver := r.editor, r.agent
		if c.Side == "client" {
			sender, receiver = r.agent, r.editor
		}
		sent := sender.find("out", c)
		if sent == nil {
			t.Errorf("%s: %s never sent it", c.Tag, sender.name)
			continue
		}
		got := receiver.find("in", c)
		if got == nil {
			t.Errorf("%s: %s never got it; %s sent\n\t%s%s", c.Tag, receiver.name, sender.name, jsonOf(sent), sender.cameBack(c))
			continue
		}
		if !c.Untagged {
			if h, ok := receiver.handled[c.Tag]; !ok {
				t.Errorf("%s: no handler of %s ran for it", c.Tag, receiver.name)
			} else if !h.Typed && !c.Extension {
				t.Errorf("%s: %s has no typed handler for %s", c.Tag, receiver.name, c.Method)
			}
		}
		r.compare(t, c.Tag+": params", c.Method, "params", sent["params"], got["params"])
		if _, isRequest := got["id"]; isRequest != (c.Kind == "request") {
			t.Errorf("%s: sent as a %s, arrived as\n\t%s", c.Tag, c.Kind, jsonOf(got))
		}
		if c.Kind == "request" {
			r.compareAnswers(t, c.Tag, c.Method, sender, sent, receiver, got)
		}
	}
	for _, side := range []string{"agent", "client"} {
		r.checkCancel(t, fmt.Sprintf("v%d %s $/cancel_request", r.version, side), side)
	}
	r.editor.checkUnexpected(t)
	r.agent.checkUnexpected(t)
}

// compareAnswers compares the answer the receiver gave to got with the one
// the sender read for sent.
func (r *fidelityRun) compareAnswers(t *testing.T, tag, method string, sender *fidelityLog, sent map[string]any, receiver *fidelityLog, got map[string]any) {
	t.Helper()
	answered := receiver.answer("out", got["id"])
	if answered == nil {
		t.Errorf("%s: %s never answered", tag, receiver.name)
		return
	}
	back := sender.answer("in", sent["id"])
	if back == nil {
		t.Errorf("%s: %s never got an answer under its id %v; %s answered\n\t%s", tag, sender.name, sent["id"], receiver.name, jsonOf(answered))
		return
	}
	for _, member := range []string{"result", "error"} {
		a, inA := answered[member]
		b, inB := back[member]
		if inA != inB {
			t.Errorf("%s: %s answered\n\t%s\n%s got\n\t%s", tag, receiver.name, jsonOf(answered), sender.name, jsonOf(back))
			return
		}
		if inA {
			r.compare(t, tag+": "+member, method, member, a, b)
		}
	}
}

// compare reports a difference between what a sender sent (want, before
// any edit the conductor documents) and what the receiver got.
func (r *fidelityRun) compare(t *testing.T, what, method, member string, want, got any) {
	t.Helper()
	if e, ok := fidelityEdits[method]; ok && r.conducted {
		if member == "params" && e.params != nil {
			want = e.params(r.version, want)
		}
		if member == "result" && e.result != nil {
			want = e.result(r.version, want)
		}
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s differ:\nsent\t%s\ngot\t%s", what, jsonOf(want), jsonOf(got))
	}
}

// checkCancel checks the $/cancel_request scenario whose sender is the
// editor (side "agent") or the agent (side "client"): the cancel arrives
// with everything it carried, naming the held request by the id its
// receiver saw, and the held request's -32800 comes back as it was sent.
func (r *fidelityRun) checkCancel(t *testing.T, tag, side string) {
	t.Helper()
	sender, receiver := r.editor, r.agent
	if side == "client" {
		sender, receiver = r.agent, r.editor
	}
	hold := fidelityCase{Tag: tag, Method: "_acp-it/fidelity/hold", Kind: "request"}
	cancel := fidelityCase{Tag: tag + " cancel", Method: "$/cancel_request", Kind: "notification"}
	heldSent, heldGot := sender.find("out", hold), receiver.find("in", hold)
	cancelSent, cancelGot := sender.find("out", cancel), receiver.find("in", cancel)
	switch {
	case heldSent == nil || heldGot == nil:
		t.Errorf("%s: the held request was not sent (%v) or did not arrive (%v)", tag, heldSent != nil, heldGot != nil)
		return
	case cancelSent == nil:
		t.Errorf("%s: %s sent no cancel", tag, sender.name)
		return
	case cancelGot == nil:
		t.Errorf("%s: %s never got the cancel; %s sent\n\t%s\nand it got\n\t%s", tag, receiver.name, sender.name, jsonOf(cancelSent),
			jsonOf(receiver.find("in", fidelityCase{Method: cancel.Method, Kind: cancel.Kind, Untagged: true})))
		return
	}
	// Only the id changes, to the one the receiver saw.
	want := setPath(cancelSent["params"], heldGot["id"], "requestId")
	if !reflect.DeepEqual(getPath(cancelSent["params"], "requestId"), heldSent["id"]) {
		t.Errorf("%s: the cancel sent names %v, not the held request %v", tag, getPath(cancelSent["params"], "requestId"), heldSent["id"])
	}
	r.compare(t, tag+": params", "$/cancel_request", "params", want, cancelGot["params"])
	r.compareAnswers(t, tag, hold.Method, sender, heldSent, receiver, heldGot)
}

// find returns the first message of case c that the log saw going dir.
func (l *fidelityLog) find(dir string, c fidelityCase) map[string]any {
	for i, w := range l.wire {
		if w.dir != dir || w.msg["method"] != c.Method {
			continue
		}
		if _, isRequest := w.msg["id"]; c.Untagged && isRequest != (c.Kind == "request") {
			continue
		}
		if c.Untagged || getPath(w.msg["params"], "_meta", "acp-it/case") == c.Tag {
			l.found[i] = true
			return w.msg
		}
	}
	return nil
}

// fidelityOwn are the methods the test's peers send each other to run the
// cases (peers/fidelity_cases.mjs).
var fidelityOwn = map[string]bool{"_acp-it/fidelity/send": true, "_acp-it/fidelity/hold": true, "_acp-it/fidelity/holding": true}

// checkUnexpected reports every request and notification the log received
// that is no case's: something the conductor made up, or sent to the
// wrong side.
func (l *fidelityLog) checkUnexpected(t *testing.T) {
	t.Helper()
	for i, w := range l.wire {
		method, ok := w.msg["method"].(string)
		if w.dir == "in" && ok && !l.found[i] && !fidelityOwn[method] {
			t.Errorf("%s got what no case sent:\n\t%s", l.name, jsonOf(w.msg))
		}
	}
}

// cameBack says so if the log, which sent case c, got it back itself.
func (l *fidelityLog) cameBack(c fidelityCase) string {
	if m := l.find("in", c); m != nil {
		return fmt.Sprintf("\nand got it back:\n\t%s", jsonOf(m))
	}
	return ""
}

// answer returns the response under id that the log saw going dir.
func (l *fidelityLog) answer(dir string, id any) map[string]any {
	for _, w := range l.wire {
		if _, isResponse := w.msg["method"]; w.dir == dir && !isResponse && reflect.DeepEqual(w.msg["id"], id) {
			return w.msg
		}
	}
	return nil
}

// checkOutcomes compares what the SDK made of each call with what it made
// of it with no conductor in between (direct): the typed result it read,
// or the error it threw.
func (r *fidelityRun) checkOutcomes(t *testing.T, direct *fidelityRun) {
	t.Helper()
	for _, c := range direct.summary.Cases {
		if _, edited := fidelityEdits[c.Method]; edited {
			continue // compared on the wire, with the edit
		}
		want, ok := direct.editor.outcomes[c.Tag]
		if !ok {
			continue
		}
		if got := r.editor.outcomes[c.Tag]; !reflect.DeepEqual(want, got) {
			t.Errorf("%s: the SDK made of it\n\t%s\nwith no conductor\n\t%s", c.Tag, jsonOf(got), jsonOf(want))
		}
	}
}

func getPath(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// setPath returns a copy of v with path set to x, making the objects on
// the way.
func setPath(v, x any, path ...string) any {
	if len(path) == 0 {
		return x
	}
	m, _ := v.(map[string]any)
	out := make(map[string]any, len(m)+1)
	for k, e := range m {
		out[k] = e
	}
	out[path[0]] = setPath(m[path[0]], x, path[1:]...)
	return out
}

// jsonOf shows v as JSON, <, > and & unescaped.
func jsonOf(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// TestFidelityRawIDs writes the editor's side of every case that the
// editor sends as raw lines, under ids the SDK never writes: strings,
// "1" beside 1, negative, zero, escaped, non-ASCII, an exponent and a
// fraction. Through each chain the agent (the SDK's, as in TestFidelity)
// must answer each case as the table says, and the editor must read the
// answer under the very id it wrote, byte for byte.
func TestFidelityRawIDs(t *testing.T) {
	requireConductor(t)
	requireLibProxy(t)
	nodePassthrough := filepath.Join(repoRoot, "bench", "node", "passthrough.mjs")
	fid := filepath.Join(peersDir, "fidelity.mjs")
	out, err := exec.Command(nodeBin, fid, "cases", "--version", "1").Output()
	if err != nil {
		t.Fatalf("fidelity.mjs cases: %v", err)
	}
	var table struct {
		Cases []struct {
			fidelityCase
			Params json.RawMessage `json:"params"`
			Reply  struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			} `json:"reply"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(out, &table); err != nil {
		t.Fatalf("fidelity.mjs cases: %v", err)
	}
	ids := []string{`"s-1"`, `"1"`, `1`, `-7`, `0`, `"\u00fc\n"`, `"ü"`, `1e3`, `2.5`, `""`, `9007199254740993`}
	for _, c := range []struct {
		name    string
		proxies []string
	}{
		{"0 proxies", nil},
		{"2 proxy-library proxies", []string{libProxyCmd("lib1"), libProxyCmd("lib2")}},
		{"2 Node proxies", []string{shellJoin(nodeBin, nodePassthrough), shellJoin(nodeBin, nodePassthrough)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			agent := shellJoin(nodeBin, fid, "agent", "--version", "1")
			p := startRaw(t, ctx, agentModeArgs(append(c.proxies, agent)...), markerVar+"="+markerChecked(t))
			run := &fidelityRun{version: 1, conducted: true}
			n := 0
			for _, k := range table.Cases {
				if k.Side != "agent" {
					continue
				}
				id := ids[n%len(ids)]
				n++
				line := `{"jsonrpc":"2.0",`
				if k.Kind == "request" {
					line += `"id":` + id + `,`
				}
				line += `"method":` + mustQuote(k.Method)
				if k.Params != nil {
					line += `,"params":` + string(k.Params)
				}
				p.send(t, line+"}")
				if k.Kind != "request" {
					continue
				}
				m := p.recv(t, ctx)
				if string(m.ID) != id {
					t.Errorf("%s: sent under id %s, answered under %s:\n\t%s", k.Tag, id, m.ID, m.raw)
					continue
				}
				for _, a := range []struct {
					member    string
					want, got json.RawMessage
				}{{"result", k.Reply.Result, m.Result}, {"error", k.Reply.Error, m.Error}} {
					if (a.want == nil) != (a.got == nil) {
						t.Errorf("%s: answered\n\t%s", k.Tag, m.raw)
						continue
					}
					if a.want != nil {
						var want, got any
						decodeJSON(a.want, &want)
						decodeJSON(a.got, &got)
						run.compare(t, k.Tag+": "+a.member, k.Method, a.member, want, got)
					}
				}
			}
			p.stdin.Close()
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("conductor: %v", err)
			}
		})
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
