package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/browser"
)

// Trace events carry text that agents, proxies and editors wrote, and a
// trace file may be edited by hand: the viewer must draw whatever a trace
// holds as text, and nothing in it may run or become part of the page.

// hostileStrings are JSON strings, as they would stand in a trace, that
// try to break out of the page, the script or the viewer's code.
var hostileStrings = []string{
	`"</script><script>window.__pwned=1</script>"`,
	`"<img src=x onerror=\"window.__pwned=1\">"`,
	`"<svg/onload=window.__pwned=1>"`,
	`"<!--<script>"`,
	`"</textarea></style></pre><b>bold</b>"`,
	`"\"'` + "`" + `&amp;&lt;\\"`,
	"\"\u2028\u2029\"", // raw, as JSON allows and JavaScript once did not
	`"\u2028\u2029"`,
	`"\ud800"`,
	`"\udfff\ud800x"`,
	`"\ud83d\ude00 é"`,
	`"\u0000\u001f\u007f"`,
	`"javascript:window.__pwned=1"`,
	`"{{DATA}}{{JS}}{{TITLE}}"`,
	`"${window.__pwned=1}"`,
	`"__proto__"`,
	`"constructor"`,
	`"toString"`,
	`"request error selected"`,
	"\"\u202erevo\u202c\"",
	`""`,
	`"session/update"`,
	`"client"`,
	`"agent"`,
}

// hostileValues are JSON values of other types, each where a string is
// expected as likely as anywhere.
var hostileValues = []string{
	`1e400`, `-1e400`, `1e-400`, `0`, `-0`, `18446744073709551616`, `1.5`, `-7`,
	`null`, `true`, `false`,
	`{}`, `[]`, `[1,"<b>x</b>"]`,
	`{"toString":1,"valueOf":1}`, `{"toJSON":"x"}`, `{"__proto__":{"polluted":1}}`,
	`{"<img src=x onerror=window.__pwned=1>":"<script>"}`,
}

// hostileValue returns any JSON value: mostly a hostile string.
func hostileValue(r *rand.Rand) string {
	if r.IntN(3) > 0 {
		return hostileStrings[r.IntN(len(hostileStrings))]
	}
	return hostileValues[r.IntN(len(hostileValues))]
}

// nested returns a value nested depth levels deep, within what
// encoding/json (and so a trace) allows.
func nested(depth int, inner string) string {
	return strings.Repeat(`[{"a":`, depth/2) + inner + strings.Repeat(`}]`, depth/2)
}

// hostileEvent returns one event line: each member of an event may be
// missing, of the right type, or of any other, and may come twice (the
// last counts); unknown members come too.
func hostileEvent(r *rand.Rand, ts int) string {
	var members []string
	pick := func(name string, good ...string) {
		switch n := r.IntN(10); {
		case n == 0: // missing
			return
		case n < 5 && len(good) > 0:
			members = append(members, fmt.Sprintf("%q:%s", name, good[r.IntN(len(good))]))
		default:
			members = append(members, fmt.Sprintf("%q:%s", name, hostileValue(r)))
		}
	}
	pick("type", `"request"`, `"response"`, `"notification"`)
	pick("ts", fmt.Sprint(ts), `1e400`, `0.001`)
	pick("protocol", `"acp"`, `"mcp"`)
	pick("from", `"client"`, `"proxy"`, `"agent"`)
	pick("to", `"client"`, `"proxy"`, `"agent"`)
	pick("id", `1`, `"a"`, `null`, `1e400`, `-0.5`, `[1]`, `{"id":1}`)
	pick("method", `"session/prompt"`, `"tools/call"`)
	pick("session", `"s1"`, `"s2"`)
	pick("connection", `"c1"`)
	pick("params", `{"text":"<b>x</b>"}`)
	pick("is_error", `true`, `false`)
	pick("payload", `{"code":-32603,"message":"<i>no</i>"}`)
	pick("bytes", `12`)
	for range r.IntN(3) { // unknown members, named by anything
		name := hostileStrings[r.IntN(len(hostileStrings))]
		members = append(members, name+":"+hostileValue(r))
	}
	if len(members) > 0 && r.IntN(8) == 0 { // a member twice
		members = append(members, members[r.IntN(len(members))])
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}"
}

// hostileTrace returns n events, among them one with huge params and
// others nested as deep as a trace allows, in params and in an id.
func hostileTrace(r *rand.Rand, n int) (events [][]byte, deep int) {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = hostileEvent(r, i)
	}
	big := `{"type":"request","ts":1,"from":"client","to":"agent","id":"big","method":"session/prompt","params":{"text":"` +
		strings.Repeat(`<img src=x onerror=window.__pwned=1>`, 1<<14) + `"}}`
	deep = r.IntN(n)
	spots := r.Perm(n)[:3]
	lines[spots[0]] = big
	lines[spots[1]] = `{"type":"notification","ts":2,"from":"agent","to":"client","method":"session/update","params":` + nested(9990, `"</script>"`) + `}`
	lines[spots[2]] = `{"type":"response","ts":3,"from":"agent","to":"client","id":` + nested(6000, `1e400`) + `,"is_error":true,"payload":` + nested(5000, `null`) + `}`
	// Not through ReadEvents, which refuses a line with no type: the page
	// must cope with any object all the same.
	for _, l := range lines {
		events = append(events, []byte(l))
	}
	return events, spots[1]
}

// The probe goes into a rendered page around the viewer's script: the
// first part listens for every error before the viewer runs, the second
// clicks each event's arrow once the viewer has drawn them and writes what
// it saw into the page, for the test to read from the DOM. Each removes
// itself.
const (
	probeHead = `<script>(function () {
  const p = window.__probe = { errors: [] };
  window.addEventListener("error", (e) => {
    p.errors.push(e.message ? String(e.message) : "failed to load: " + (e.target && e.target.outerHTML || "?").slice(0, 200));
  }, true);
  window.addEventListener("unhandledrejection", (e) => p.errors.push("unhandled rejection: " + String(e.reason)));
  document.addEventListener("securitypolicyviolation", (e) => p.errors.push("CSP: " + e.violatedDirective + " " + e.blockedURI));
  document.currentScript.remove();
})();</script>`
	probeTail = `<script>(function () {
  const out = { errors: window.__probe.errors, missing: [], detail: [], labels: [], classes: [], handlers: [] };
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const arrow = (i) => document.querySelector('.arrow[data-index="' + i + '"]');
  for (let i = 0; i < data.length; i++) {
    const a = arrow(i), l = a && a.querySelector(".label");
    if (!a) out.missing.push(i);
    out.labels.push(l ? l.textContent : null);
    out.classes.push(a ? a.className : null);
  }
  for (let i = 0; i < data.length; i++) {
    const a = arrow(i);
    if (!a) continue;
    a.click();
    const body = document.getElementById("detail-body").textContent;
    let keys = null;
    try { keys = Object.keys(JSON.parse(body)).join(); } catch (e) {}
    if (document.getElementById("detail").hidden || keys !== Object.keys(data[i]).join()) out.detail.push(i);
  }
  for (const el of document.querySelectorAll("*")) {
    for (const at of el.attributes) if (/^on/i.test(at.name)) out.handlers.push(el.tagName + " " + at.name);
  }
  out.pwned = !!window.__pwned;
  // Chromium's --dump-dom crashes on a lone surrogate in the page (the
  // browser, not the page: a real one shows it as U+FFFD), so the text
  // the viewer drew is made well-formed before it is dumped.
  const w = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  for (let n = w.currentNode; n; n = w.nextNode()) {
    if (n.nodeType === Node.TEXT_NODE) n.data = n.data.toWellFormed();
    else for (const at of n.attributes) at.value = at.value.toWellFormed();
  }
  document.documentElement.setAttribute("data-probe", JSON.stringify(out));
  document.currentScript.remove();
})();</script>`
)

// What the probe found.
type probed struct {
	Errors   []string  `json:"errors"`
	Missing  []int     `json:"missing"`  // events with no arrow
	Detail   []int     `json:"detail"`   // events whose detail did not show them
	Labels   []*string `json:"labels"`   // each event's arrow's label
	Classes  []*string `json:"classes"`  // and its classes, before any was clicked
	Handlers []string  `json:"handlers"` // elements with event handler attributes
	Pwned    bool      `json:"pwned"`
}

// truthy says whether JavaScript takes v, as encoding/json decodes it
// with UseNumber, for true.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, _ := strconv.ParseFloat(string(v), 64) // ±Inf past a double, as JSON.parse reads it
		return f != 0
	}
	return true // an object or an array
}

// The elements the viewer's page is made of: anything else came from a
// trace.
var viewerTags = []string{"html", "head", "meta", "title", "style", "body", "header", "h1", "label", "select", "option",
	"input", "datalist", "span", "div", "aside", "button", "pre", "script"}

var (
	probeRe  = regexp.MustCompile(`data-probe="([^"]*)"`)
	tagRe    = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9-]*)`)
	scriptRe = regexp.MustCompile(`(?is)<(script|style)\b[^>]*>.*?</(script|style)>`)
)

// renderProbed renders events with the probe in a headless browser,
// opened with fragment, tall enough that every row is drawn, and returns
// what the probe found and the DOM.
func renderProbed(t *testing.T, events [][]byte, fragment string) (probed, string) {
	t.Helper()
	var page bytes.Buffer
	if err := View(&page, events, ViewOptions{Title: `<img src=x onerror=window.__pwned=1>`}); err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(page.String(), "<head>", "<head>"+probeHead, 1)
	if i := strings.LastIndex(doc, "</body>"); i < 0 {
		t.Fatal("the page has no </body>")
	} else {
		doc = doc[:i] + probeTail + doc[i:]
	}
	path := filepath.Join(t.TempDir(), "trace.html")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := browser.DumpDOM(ctx, "file://"+path+fragment, 1400, len(events)*24+400)
	if err != nil {
		t.Fatal(err)
	}
	m := probeRe.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe never reported: the page's scripts stopped early. The page:\n%.3000s", dom)
	}
	var p probed
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &p); err != nil {
		t.Fatalf("the probe's report: %v", err)
	}
	return p, dom
}

// checkNothingInjected checks that the page holds only the viewer's own
// elements, two scripts among them, and that nothing ran or failed.
func checkNothingInjected(t *testing.T, p probed, dom string) {
	t.Helper()
	if len(p.Errors) > 0 {
		t.Errorf("script errors: %q", p.Errors)
	}
	if p.Pwned || len(p.Handlers) > 0 {
		t.Errorf("the trace ran code (%v) or gave elements handlers: %q", p.Pwned, p.Handlers)
	}
	if n := strings.Count(strings.ToLower(dom), "<script"); n != 2 {
		t.Errorf("%d scripts in the page, want the viewer's 2", n)
	}
	for _, m := range tagRe.FindAllStringSubmatch(scriptRe.ReplaceAllString(dom, ""), -1) {
		if !slices.Contains(viewerTags, strings.ToLower(m[1])) {
			t.Errorf("a <%s> element the viewer never makes is in the page", m[1])
		}
	}
}

// TestViewHostileEvents renders traces of randomized hostile events
// (markup, quotes, line separators, lone surrogates, members of every
// type or missing, unknown members, numbers past a double, huge and deeply
// nested values) and checks, in the page the browser made: no script
// error, no element the trace made, every event drawn with its method,
// and each one's detail shown when clicked. Seeded, so a failure repeats.
func TestViewHostileEvents(t *testing.T) {
	if _, err := browser.Find(); err != nil {
		t.Skipf("no browser: %v", err)
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x7ace))
			events, deep := hostileTrace(r, 40)
			// The deepest event selected from the URL, as a shared link would.
			p, dom := renderProbed(t, events, fmt.Sprintf("#select=%d", deep))
			checkNothingInjected(t, p, dom)
			d := parseDOM(t, dom)
			if d.total != len(events) || d.shown != len(events) {
				t.Errorf("status %d of %d events, want all %d", d.shown, d.total, len(events))
			}
			if len(p.Missing) > 0 || len(p.Detail) > 0 {
				t.Errorf("events not drawn: %v; events whose detail did not show: %v", p.Missing, p.Detail)
			}
			for i, e := range events {
				if i >= len(p.Labels) || p.Labels[i] == nil || p.Classes[i] == nil {
					continue // reported missing
				}
				dec := json.NewDecoder(bytes.NewReader(e))
				dec.UseNumber()
				var ev map[string]any
				if err := dec.Decode(&ev); err != nil {
					t.Fatal(err)
				}
				if method, ok := ev["method"].(string); ok && !strings.Contains(*p.Labels[i], method) {
					t.Errorf("event %d's label %q lacks its method %q", i, *p.Labels[i], method)
				}
				// The arrow is drawn as what the event is, whatever its type
				// says: "request error selected" is no error, nor selected.
				kind := "other"
				if typ, _ := ev["type"].(string); typ == "request" || typ == "response" || typ == "notification" {
					kind = typ
				}
				classes := strings.Fields(*p.Classes[i])
				wantError := kind == "response" && truthy(ev["is_error"])
				if !slices.Contains(classes, kind) || slices.Contains(classes, "error") != wantError || slices.Contains(classes, "selected") != (i == deep) {
					t.Errorf("event %d (%s) drawn as %q: want %s, an error %v, selected %v", i, e[:min(len(e), 200)], *p.Classes[i], kind, wantError, i == deep)
				}
				for _, c := range classes {
					if !slices.Contains([]string{"arrow", "request", "response", "notification", "other", "error", "mcp", "self", "selected"}, c) {
						t.Errorf("event %d drawn with class %q", i, c)
					}
				}
			}
		})
	}
	// Filters from the URL that hold markup.
	r := rand.New(rand.NewPCG(4, 0x7ace))
	events, _ := hostileTrace(r, 20)
	p, dom := renderProbed(t, events, "#session=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E&method=%3C%2Fscript%3E&connection=%3Cb%3E")
	checkNothingInjected(t, p, dom)
}
