package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/browser"
)

// TestTraceLive runs a real chain with --trace and --trace-serve: the URL
// of the live viewer is logged, the page it serves draws the chain's
// messages in a browser, and after the chain stops, trace view renders
// the file into a page that draws the same.
func TestTraceLive(t *testing.T) {
	if _, err := browser.Find(); err != nil {
		t.Skipf("no browser: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "chain.jsons")
	samples := shellQuote(demo)
	cmd := exec.Command(binary, "agent", "--trace", file, "--trace-serve", "127.0.0.1:0",
		samples+" sample-proxy", samples+" sample-agent")
	cmd.Env = cleanEnv()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// The URL comes first, before the chain takes any input.
	logs := bufio.NewScanner(stderr)
	urlRe := regexp.MustCompile(`http://127\.0\.0\.1:\d+/[0-9a-f]{32}/`)
	var url string
	for url == "" && logs.Scan() {
		if strings.Contains(logs.Text(), "live trace viewer") {
			url = urlRe.FindString(logs.Text())
		}
	}
	if url == "" {
		t.Fatal("no viewer URL logged")
	}
	go io.Copy(io.Discard, stderr)

	out := bufio.NewReader(stdout)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
	} {
		fmt.Fprintln(stdin, line)
		if _, err := out.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	// The answer reached the editor after it was recorded; the viewer has
	// it once the recorder has caught up.
	events := waitEvent(t, url, `"type":"response"`, `"to":"client"`, `"method":"session/new"`)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := browser.DumpDOM(ctx, url, 1400, 2000)
	if err != nil {
		t.Fatal(err)
	}
	checkDrawn(t, "live page", dom, 3, events)

	stdin.Close()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("conductor: %v", err)
	}
	page := filepath.Join(dir, "chain.html")
	if r := acp(t, "", nil, "trace", "view", file); r.code != 0 {
		t.Fatalf("trace view: %d\n%s", r.code, r.stderr)
	}
	dom, err = browser.DumpDOM(ctx, "file://"+page, 1400, 2000)
	if err != nil {
		t.Fatal(err)
	}
	checkDrawn(t, "trace view", dom, 3, events)
}

// waitEvent reads the live viewer's stream of events until one holds every
// one of parts, and returns the number of events up to that one.
func waitEvent(t *testing.T, url string, parts ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"events?from=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stream := bufio.NewScanner(resp.Body)
	stream.Buffer(nil, 1<<20)
	seq := -1
	for stream.Scan() {
		k, v, _ := strings.Cut(stream.Text(), ": ")
		switch k {
		case "id":
			seq, _ = strconv.Atoi(v)
		case "data":
			all := true
			for _, p := range parts {
				all = all && strings.Contains(v, p)
			}
			if all {
				return seq + 1
			}
		}
	}
	t.Fatalf("the event stream ended (%v) before an event with %v", stream.Err(), parts)
	return 0
}

// checkDrawn checks that a viewer page drew lanes lifelines and an arrow
// for each of events.
func checkDrawn(t *testing.T, what, dom string, lanes, events int) {
	t.Helper()
	if got := strings.Count(dom, `class="lane-head"`); got != lanes {
		t.Errorf("%s: %d lanes, want %d (client, sample-proxy, sample-agent)", what, got, lanes)
	}
	if got := strings.Count(dom, `class="arrow `); got != events {
		t.Errorf("%s: %d arrows, want %d", what, got, events)
	}
	if !strings.Contains(dom, fmt.Sprintf(`data-total="%d"`, events)) {
		t.Errorf("%s: the status does not count %d events", what, events)
	}
}

// TestTraceView: trace view says on stderr where it wrote the page, which
// is there, readable by its owner alone, and says nothing when the page
// goes to stdout.
func TestTraceView(t *testing.T) {
	file := writeFile(t, "chain.jsons",
		`{"type":"request","ts":0.01,"protocol":"acp","from":"client","to":"agent","id":1,"method":"initialize","bytes":2}`+"\n"+
			`{"type":"response","ts":0.02,"protocol":"acp","from":"agent","to":"client","id":1,"method":"initialize","is_error":false,"bytes":2}`+"\n")
	dir := filepath.Dir(file)
	for _, tc := range []struct {
		args []string
		page string
	}{
		{nil, filepath.Join(dir, "chain.html")},
		{[]string{"-o", filepath.Join(dir, "other.html")}, filepath.Join(dir, "other.html")},
	} {
		r := acp(t, "", nil, append([]string{"trace", "view", file}, tc.args...)...)
		want := "wrote " + tc.page + " (2 events): open it in a browser\n"
		if r.code != 0 || r.stdout != "" || r.stderr != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0, stderr %q", tc.args, r.code, r.stdout, r.stderr, want)
		}
		if page, err := os.ReadFile(tc.page); err != nil || !strings.Contains(string(page), `"method":"initialize"`) {
			t.Errorf("%q: the page %s: %v", tc.args, tc.page, err)
		}
		// It holds the whole trace, which --trace writes for its owner alone.
		if fi, err := os.Stat(tc.page); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%q: the page %s has mode %v (%v); want it readable by its owner alone, as the trace is", tc.args, tc.page, fi.Mode(), err)
		}
	}
	r := acp(t, "", nil, "trace", "view", file, "-o", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "<!DOCTYPE html>") || r.stderr != "" {
		t.Errorf("-o -: exit %d, stdout %.40q..., stderr %q; want the page on stdout alone", r.code, r.stdout, r.stderr)
	}
}

// TestTraceViewCutShort: the trace of a chain still running, or killed,
// may end in the middle of a line, as its writer left it; trace view
// draws the events before that line, says on stderr that it left the
// last one out, and exits 0. A line cut short before others is still an
// error.
func TestTraceViewCutShort(t *testing.T) {
	whole := `{"type":"request","ts":0.01,"protocol":"acp","from":"client","to":"agent","id":1,"method":"initialize","bytes":2}` + "\n"
	next := `{"type":"response","ts":0.02,"protocol":"acp","from":"agent","to":"client","id":1,"method":"initialize","is_error":false,"bytes":2}`
	file := writeFile(t, "chain.jsons", whole+next[:40])
	page := strings.TrimSuffix(file, ".jsons") + ".html"
	r := acp(t, "", nil, "trace", "view", file)
	if r.code != 0 || !strings.Contains(r.stderr, "line 2: the last line is cut short") || !strings.Contains(r.stderr, "wrote "+page+" (1 event)") {
		t.Errorf("exit %d, stderr %q; want exit 0, the page of 1 event, and line 2 said to be cut short", r.code, r.stderr)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), `"method":"initialize"`) {
		t.Errorf("the page %s: %v", page, err)
	}

	file = writeFile(t, "middle.jsons", whole+next[:40]+"\n"+next+"\n")
	if r := acp(t, "", nil, "trace", "view", file); r.code != 1 || !strings.Contains(r.stderr, "line 2: not a JSON trace event") {
		t.Errorf("a line cut short in the middle: exit %d, stderr %q; want exit 1 naming line 2", r.code, r.stderr)
	}
}

// TestTraceViewNotATrace: JSON Lines of another kind, such as a
// transcript-recorder file, are refused with the line and why, rather
// than drawn as an empty diagram; no page is written.
func TestTraceViewNotATrace(t *testing.T) {
	file := writeFile(t, "transcript.jsonl", `{"time":"2025-06-01T12:00:00.123Z","direction":"to_agent","message":{"jsonrpc":"2.0","id":3,"method":"session/prompt"}}`+"\n")
	r := acp(t, "", nil, "trace", "view", file)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, file+`: line 1: not a JSON trace event: it has no "type" string`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing and line 1 refused", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(strings.TrimSuffix(file, ".jsonl") + ".html"); !os.IsNotExist(err) {
		t.Errorf("a page was written (%v)", err)
	}
}

// TestTraceViewKeepsTrace: trace view refuses to write its page over the
// trace, whatever names it: the trace's own name, a symbolic link to it,
// or a hard link that is the default page's name. The trace is left as
// it was.
func TestTraceViewKeepsTrace(t *testing.T) {
	content := `{"type":"request","ts":0.01,"protocol":"acp","from":"client","to":"agent","id":1,"method":"initialize","bytes":2}` + "\n"
	file := writeFile(t, "chain.jsons", content)
	dir := filepath.Dir(file)
	symlink, hardlink := filepath.Join(dir, "link.html"), filepath.Join(dir, "chain.html")
	if err := os.Symlink(file, symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, hardlink); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-o", file}, {"-o", symlink}, nil} {
		r := acp(t, "", nil, append([]string{"trace", "view", file}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "would overwrite the trace") {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and a refusal to overwrite the trace", args, r.code, r.stderr)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != content {
			t.Fatalf("%q: the trace now holds %.60q (%v)", args, b, err)
		}
	}
}
