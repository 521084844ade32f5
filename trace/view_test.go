package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/browser"
)

// render writes events as a viewer page and returns the DOM a headless
// browser makes of it, opened with the given URL fragment.
func render(t *testing.T, events [][]byte, fragment string, height int) string {
	t.Helper()
	if _, err := browser.Find(); err != nil {
		t.Skipf("no browser: %v", err)
	}
	var page bytes.Buffer
	if err := View(&page, events, ViewOptions{Title: "test"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.html")
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := browser.DumpDOM(ctx, "file://"+path+fragment, 1400, height)
	if err != nil {
		t.Fatal(err)
	}
	return dom
}

// A page as the browser left it: what the viewer drew.
type drawn struct {
	lanes, arrows        int
	shown, total, nLanes int
	labels               []string
	detail               string
}

var (
	laneRe   = regexp.MustCompile(`class="lane-head"[^>]*>([^<]*)<`)
	arrowRe  = regexp.MustCompile(`class="arrow [^"]*"`)
	labelRe  = regexp.MustCompile(`class="label"[^>]*>([^<]*)<`)
	statusRe = regexp.MustCompile(`id="status" data-shown="(\d+)" data-total="(\d+)" data-lanes="(\d+)"`)
	detailRe = regexp.MustCompile(`(?s)<pre id="detail-body">(.*?)</pre>`)
)

func parseDOM(t *testing.T, dom string) drawn {
	t.Helper()
	var d drawn
	d.lanes = len(laneRe.FindAllString(dom, -1))
	d.arrows = len(arrowRe.FindAllString(dom, -1))
	for _, m := range labelRe.FindAllStringSubmatch(dom, -1) {
		d.labels = append(d.labels, m[1])
	}
	s := statusRe.FindStringSubmatch(dom)
	if s == nil {
		t.Fatalf("the viewer drew no status; the page is:\n%.3000s", dom)
	}
	d.shown, _ = strconv.Atoi(s[1])
	d.total, _ = strconv.Atoi(s[2])
	d.nLanes, _ = strconv.Atoi(s[3])
	if m := detailRe.FindStringSubmatch(dom); m != nil {
		d.detail = m[1]
	}
	return d
}

func goldenEvents(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "conductor", "testdata", "golden", "trace-full.jsons"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// TestViewInBrowser renders the golden chain's trace in headless Chromium:
// one lane per component, one arrow per event, a selected event shown
// whole; and the filters in the URL (a method, a session) leave exactly
// the matching arrows.
func TestViewInBrowser(t *testing.T) {
	events := goldenEvents(t)
	count := func(sub string) int {
		n := 0
		for _, e := range events {
			if strings.Contains(string(e), sub) {
				n++
			}
		}
		return n
	}
	call := -1 // the MCP tool call
	for n, e := range events {
		if strings.Contains(string(e), `"method":"tools/call"`) && strings.Contains(string(e), `"type":"request"`) {
			call = n
		}
	}
	d := parseDOM(t, render(t, events, fmt.Sprintf("#select=%d", call), 3000))
	if d.lanes != 4 || d.nLanes != 4 {
		t.Errorf("%d lanes drawn (status %d), want 4: client, proxy-a, proxy-b, agent", d.lanes, d.nLanes)
	}
	if d.arrows != len(events) || d.total != len(events) || d.shown != len(events) {
		t.Errorf("%d arrows drawn, status %d of %d; want %d", d.arrows, d.shown, d.total, len(events))
	}
	for _, want := range []string{`"protocol": "mcp"`, `"method": "tools/call"`, `"name": "echo"`} {
		if !strings.Contains(d.detail, want) {
			t.Errorf("the selected event's detail lacks %s:\n%s", want, d.detail)
		}
	}

	d = parseDOM(t, render(t, events, "#method=session/update", 3000))
	if want := count(`"method":"session/update"`); d.arrows != want || d.shown != want || want == 0 {
		t.Errorf("method filter: %d arrows, status %d; want %d", d.arrows, d.shown, want)
	}
	for _, l := range d.labels {
		if l != "session/update" {
			t.Errorf("method filter let %q through", l)
		}
	}
	d = parseDOM(t, render(t, events, "#session=sess-1", 3000))
	if want := count(`"session":"sess-1"`); d.arrows != want || d.shown != want || want == 0 || want == len(events) {
		t.Errorf("session filter: %d arrows, status %d; want %d", d.arrows, d.shown, want)
	}
}

// TestViewLargeTrace renders 100,000 events: the page keeps them all but
// draws only the rows in view, whatever the trace's length.
func TestViewLargeTrace(t *testing.T) {
	const n = 100_000
	events := make([][]byte, n)
	names := []string{"client", "p1", "p2", "p3", "agent"}
	for i := range events {
		hop := i % 4
		from, to := names[hop], names[hop+1]
		events[i] = fmt.Appendf(nil, `{"type":"notification","ts":%d,"from":%q,"to":%q,"method":"session/update","session":"s%d","params":%d}`,
			i, from, to, i%7, i)
	}
	d := parseDOM(t, render(t, events, "#session=s3", 1000))
	if want := (n + 3) / 7; d.total != n || d.shown != want || d.lanes != 5 {
		t.Errorf("status %d of %d, %d lanes; want %d of %d, 5", d.shown, d.total, d.lanes, want, n)
	}
	if d.arrows == 0 || d.arrows > 200 {
		t.Errorf("%d arrows in the page; want only those in view (some dozens)", d.arrows)
	}
}

// TestViewEscapes keeps a message that holds markup from breaking out of
// the page's data.
func TestViewEscapes(t *testing.T) {
	var page bytes.Buffer
	evil := []byte(`{"type":"notification","ts":0,"protocol":"acp","from":"a","to":"b","method":"x","params":{"t":"</script><script>alert(1)</script>"}}`)
	if err := View(&page, [][]byte{evil}, ViewOptions{Title: "<b>t</b>"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "<script>alert") || strings.Contains(page.String(), "<b>t</b>") {
		t.Error("markup from the trace reached the page unescaped")
	}
	if strings.Contains(page.String(), "http://") || strings.Contains(page.String(), "https://") {
		t.Error("the page refers to the network")
	}
}

func TestReadEvents(t *testing.T) {
	events, err := ReadEvents(strings.NewReader("{\"type\":\"a\"}\n\n  {\"type\":\"b\"}\n"))
	if err != nil || len(events) != 2 {
		t.Fatalf("got %d events, %v", len(events), err)
	}
	if _, err := ReadEvents(strings.NewReader("{\"type\":\"a\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("got %v, want an error naming line 2", err)
	}
	// JSON Lines of another kind: objects, but no events.
	if _, err := ReadEvents(strings.NewReader("{\"type\":\"a\"}\n{\"time\":\"12:00\",\"message\":{}}\n")); err == nil || !strings.Contains(err.Error(), `line 2: not a JSON trace event: it has no "type"`) {
		t.Errorf("got %v, want line 2 refused for want of a type", err)
	}
	// The key is "type" exactly, as the viewer reads it.
	if _, err := ReadEvents(strings.NewReader("{\"type\":\"a\"}\n{\"TYPE\":\"b\"}\n")); err == nil || !strings.Contains(err.Error(), `line 2: not a JSON trace event: it has no "type"`) {
		t.Errorf("got %v, want line 2 refused: \"TYPE\" is not \"type\"", err)
	}
	// A last line with no newline is one being written, or left so.
	events, err = ReadEvents(strings.NewReader("{\"type\":\"a\"}\n{\"b\":"))
	if !errors.Is(err, ErrCutShort) || !strings.Contains(err.Error(), "line 2") || len(events) != 1 {
		t.Errorf("got %d events, %v; want 1 and ErrCutShort naming line 2", len(events), err)
	}
	if events, err = ReadEvents(strings.NewReader("{\"type\":\"a\"}\n{\"type\":\"b\"}")); err != nil || len(events) != 2 {
		t.Errorf("a whole last line with no newline: got %d events, %v", len(events), err)
	}
	// A line longer than an event may be is named, with the limit.
	defer func(n int) { maxEventBytes = n }(maxEventBytes)
	maxEventBytes = 1 << 20
	long := io.MultiReader(strings.NewReader("{\"type\":\"a\"}\n{\"b\":\""), io.LimitReader(repeatByte('x'), 2<<20))
	if _, err := ReadEvents(long); err == nil || !strings.Contains(err.Error(), "line 2: longer than") {
		t.Errorf("got %v, want an error naming line 2 as too long", err)
	}
}

// repeatByte is an endless reader of one byte.
type repeatByte byte

func (b repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// FuzzView feeds arbitrary trace files to ReadEvents and View: whatever a
// file holds, reading it fails cleanly or the page keeps it inside its
// data, unable to end the script or the page.
func FuzzView(f *testing.F) {
	f.Add([]byte(`{"type":"request","ts":0,"from":"a","to":"b","id":1,"method":"m","params":{"x":"</script>"}}` + "\n"))
	f.Add([]byte("{}\n\n{\"a\":[1,2]}\n"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ReadEvents(bytes.NewReader(data))
		if err != nil {
			return
		}
		var page bytes.Buffer
		if err := View(&page, events, ViewOptions{}); err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(page.String(), `<script id="trace-data" type="application/json">`)
		body, _, _ := strings.Cut(rest, "</script>")
		if !json.Valid([]byte(body)) {
			t.Fatalf("the page's data ends early or is not JSON: %.200s", body)
		}
	})
}

// TestViewConnections: a trace serve wrote for two connections gets a
// connection filter, and the filter in the URL leaves exactly that
// connection's arrows; a trace of one chain has no such filter.
func TestViewConnections(t *testing.T) {
	var events [][]byte
	for i, conn := range []string{"A", "B", "A", "A", "B"} {
		events = append(events, []byte(fmt.Sprintf(`{"type":"notification","ts":%d,"connection":%q,"protocol":"acp","from":"agent","to":"client","method":"session/update","session":"s-%s","bytes":2}`, i, conn, conn)))
	}
	dom := render(t, events, "#connection=A", 1000)
	d := parseDOM(t, dom)
	if d.arrows != 3 || d.shown != 3 || d.total != 5 {
		t.Errorf("connection filter: %d arrows, status %d of %d; want 3 of 5", d.arrows, d.shown, d.total)
	}
	if !regexp.MustCompile(`<label id="connection-filter">`).MatchString(dom) {
		t.Errorf("the connection filter is hidden:\n%.2000s", dom)
	}
	if dom := render(t, goldenEvents(t), "", 1000); !strings.Contains(dom, `<label id="connection-filter" hidden="">`) {
		t.Errorf("a trace of one chain shows a connection filter")
	}
}

// TestViewTitleWithSlots: a title (a trace file's name, --title, --name)
// that holds the template's slot names changes nothing but the title.
func TestViewTitleWithSlots(t *testing.T) {
	var page bytes.Buffer
	event := `{"type":"request","ts":0,"protocol":"acp","from":"a","to":"b","method":"m"}`
	if err := View(&page, [][]byte{[]byte(event)}, ViewOptions{Title: "x{{DATA}}{{JS}}"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<title>x{{DATA}}{{JS}}</title>") || strings.Count(page.String(), `"method":"m"`) != 1 ||
		!strings.Contains(page.String(), `[`+event+`]`) {
		t.Errorf("the page with that title:\n%.2000s", page.String())
	}
}

// TestViewRequestBindingError renders a recorded MCP call whose owner binds
// per request and answered with an MCP error: the viewer draws the answer
// as an error, as it draws an ACP one.
func TestViewRequestBindingError(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, Options{})
	r.Send("mcp:ed", "client", json.RawMessage("5"), "mcp/message", json.RawMessage(`{"serverId":"ed-1","requestId":5,"method":"tools/call","params":{"name":"wait"}}`), true)
	r.Reply("client", "mcp:ed", json.RawMessage("5"), json.RawMessage(`{"error":{"code":-32800,"message":"cancelled"}}`), false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := ReadEvents(&out)
	if err != nil {
		t.Fatal(err)
	}
	dom := render(t, events, "", 600)
	arrows := arrowRe.FindAllString(dom, -1)
	if len(arrows) != 2 || !strings.Contains(arrows[1], "response error mcp") || !strings.Contains(dom, "✗ mcp tools/call") {
		t.Errorf("the answer is drawn as %q, labels %q; want an MCP error", arrows, parseDOM(t, dom).labels)
	}
}

// TestViewSelectionHonoursFilter: a selection in the URL that the filters
// hide (event 300 is in session s6, the view is of s3) selects nothing,
// and the status says so; one they show is selected and detailed.
func TestViewSelectionHonoursFilter(t *testing.T) {
	var events [][]byte
	for i := range 400 {
		events = append(events, fmt.Appendf(nil, `{"type":"notification","ts":%d,"from":"agent","to":"client","method":"session/update","session":"s%d","params":{"n":%d}}`,
			i, i%7, i))
	}
	dom := render(t, events, "#session=s3&select=300", 1000)
	if d := parseDOM(t, dom); d.detail != "" || strings.Contains(dom, "arrow notification selected") {
		t.Errorf("event 300, of session s6, is selected in a view of s3:\n%s", d.detail)
	}
	if !strings.Contains(dom, `data-unselected="300"`) || !strings.Contains(dom, "event 300 is hidden by the filter") {
		t.Errorf("the status does not say that event 300 is hidden:\n%.1500s", dom)
	}
	dom = render(t, events, "#session=s3&select=297", 1000)
	if d := parseDOM(t, dom); !strings.Contains(d.detail, `"n": 297`) || strings.Contains(dom, "data-unselected") {
		t.Errorf("event 297, of session s3, is not selected in a view of s3:\n%s", d.detail)
	}
}

// TestViewGaps: a gap the recorder marked ("trace" with fields.dropped)
// is drawn where it is, across the lanes, whatever the filters, and adds
// no lane; the status says how many messages the gaps held.
func TestViewGaps(t *testing.T) {
	var events [][]byte
	for i := range 6 {
		if i == 3 {
			events = append(events, []byte(`{"type":"trace","ts":3,"component":"conductor","level":"warn","message":"trace gap: 5 messages left out here","fields":{"dropped":5}}`))
		}
		events = append(events, fmt.Appendf(nil, `{"type":"notification","ts":%d,"protocol":"acp","from":"agent","to":"client","method":"session/update","session":"s%d","bytes":2}`, i, i%2))
	}
	dom := render(t, events, "#session=s1", 1000)
	d := parseDOM(t, dom)
	if d.lanes != 2 || d.shown != 4 || d.total != 7 {
		t.Errorf("%d lanes, status %d of %d; want 2 lanes (agent, client), 4 of 7 (three of s1 and the gap)", d.lanes, d.shown, d.total)
	}
	if n := strings.Count(dom, `class="arrow gap"`); n != 1 {
		t.Errorf("%d gaps drawn, want 1:\n%.3000s", n, dom)
	}
	if i := strings.Index(dom, `class="arrow gap"`); i < 0 || !regexp.MustCompile(`class="arrow gap"[^>]*>.*?trace gap: 5 messages`).MatchString(dom[i:]) {
		t.Errorf("the gap does not say what it is:\n%.3000s", dom)
	}
	if !strings.Contains(dom, `data-lost="5"`) || !strings.Contains(dom, "5 messages lost in gaps") {
		t.Errorf("the status does not count the lost messages:\n%.1500s", dom)
	}
	if order := regexp.MustCompile(`data-index="(\d+)"`).FindAllStringSubmatch(dom, -1); len(order) != 4 || order[1][1] != "3" {
		t.Errorf("rows %v, want the gap (event 3) second, between s1's events 1 and 4", order)
	}
}
