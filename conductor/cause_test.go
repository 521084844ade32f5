package conductor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestFailureMessage: the editor's error for a component that ended names
// it once and says, after its exit status, the stderr line that most
// likely gives the cause, since editors show the message and not the data;
// the data still has every line.
func TestFailureMessage(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	tests := []struct {
		name, script, want string
		initTimeout        time.Duration
	}{
		{"last line", `echo starting >&2; echo boom >&2; echo >&2; exit 2`,
			`component "sh" ended unexpectedly (exit status 2): boom`, 0},
		{"killed", `echo started >&2; kill -KILL $$`,
			`component "sh" ended unexpectedly (signal: killed)`, 0},
		{"terminated", `echo started >&2; kill -TERM $$`,
			`component "sh" ended unexpectedly (signal: terminated)`, 0},
		{"other signal", `echo boom >&2; kill -USR1 $$`,
			`component "sh" ended unexpectedly (signal: user defined signal 1): boom`, 0},
		{"no stderr", `exit 3`,
			`component "sh" ended unexpectedly (exit status 3)`, 0},
		{"node trace", `printf 'file.js:1\nthrow e\n^\n\nError: 401 Unauthorized\n    at f (file.js:1:7)\n    at g (file.js:2:1)\n\nNode.js v22.3.0\n' >&2; exit 1`,
			`component "sh" ended unexpectedly (exit status 1): Error: 401 Unauthorized`, 0},
		{"terminal escapes", `printf '\033[31merror:\033[0m\tconnection refused\r\n' >&2; exit 1`,
			`component "sh" ended unexpectedly (exit status 1): error: connection refused`, 0},
		{"long line", `echo ` + long + ` >&2; exit 1`,
			`component "sh" ended unexpectedly (exit status 1): ` + strings.Repeat("é", 98) + `...`, 0},
		{"init timeout", `echo waiting >&2; exec sleep 30`,
			`component "sh" did not answer initialize within 200ms`, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startChain(t, Config{Agent: Component{Command: "sh", Args: []string{"-c", tt.script}}, InitTimeout: tt.initTimeout, GracePeriod: 100 * time.Millisecond})
			e.send(initLine)
			m := e.recvMsg()
			var got wire.Error
			if err := json.Unmarshal(m.Error, &got); err != nil {
				t.Fatalf("initialize answered %s %s, want an error", m.Result, m.Error)
			}
			if got.Message != tt.want {
				t.Errorf("message %q\nwant    %q", got.Message, tt.want)
			}
			var data exitError
			if err := json.Unmarshal(got.Data, &data); err != nil || data.Component != "sh" || data.Status == "" ||
				(tt.name == "last line" && strings.Join(data.Stderr, "|") != "starting|boom|") {
				t.Errorf("data %s, want the component, its status and stderr", got.Data)
			}
		})
	}
}

func TestStderrCause(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"none", nil, ""},
		{"blank", []string{"", "  "}, ""},
		{"last", []string{"listening", "boom", "", " "}, "boom"},
		{"cobra", []string{"Error: unknown flag: --bogus", "Usage:", "  agent [flags]", "", "Flags:", "  -h, --help   help for agent", "", "Run 'agent --help' for usage."}, "Error: unknown flag: --bogus"},
		{"clap", []string{"error: unexpected argument '--bogus' found", "", "Usage: agent [OPTIONS]", "", "For more information, try '--help'."}, "error: unexpected argument '--bogus' found"},
		{"usage alone", []string{"Usage: agent FILE"}, "Usage: agent FILE"},
		{"go panic", []string{"panic: boom", "", "goroutine 1 [running]:", "main.main()", "\t/src/main.go:5 +0x18", "exit status 2"}, "panic: boom"},
		{"go fatal error", []string{"fatal error: all goroutines are asleep - deadlock!", "", "goroutine 1 [chan receive]:", "main.main()", "\t/src/main.go:4 +0x1d"}, "fatal error: all goroutines are asleep - deadlock!"},
		{"goroutine header without panic", []string{"goroutine 1 [running]:", "main.main()", "\t/src/main.go:5 +0x18"}, "main.main()"},
		{"python", []string{"Traceback (most recent call last):", `  File "a.py", line 1, in <module>`, "    raise ValueError('boom')", "ValueError: boom"}, "ValueError: boom"},
		{"java", []string{`Exception in thread "main" java.lang.IllegalStateException: boom`, "\tat Main.main(Main.java:3)"}, `Exception in thread "main" java.lang.IllegalStateException: boom`},
		{"rust", []string{"thread 'main' panicked at src/main.rs:2:5:", "boom", "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"}, "boom"},
		{"node error with properties", []string{"node:internal/modules/esm/resolve:873", "  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);", "        ^", "",
			"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from /a.mjs", "    at packageResolve (node:internal/modules/esm/resolve:873:9)", "    at ModuleJob._link (node:internal/modules/esm/module_job:168:49) {",
			"  code: 'ERR_MODULE_NOT_FOUND'", "}", "", "Node.js v20.20.2"}, "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from /a.mjs"},
		{"only punctuation", []string{"}", ")"}, ")"},
		{"only frames", []string{"    at a (x.js:1:1)", "    at b (x.js:2:1)"}, "at b (x.js:2:1)"},
		{"control characters", []string{"a\x00b\x1b[0m\tc\u202ed\x7f\u0085e"}, "ab[0m cde"},
		{"invalid UTF-8", []string{"bad \xff\xfe byte"}, "bad  byte"},
		{"nested conductor, console", []string{"INFO\tstopped\t{}", "ERROR\tconductor failed\t{\"error\": \"component \\\"x\\\" ended: boom\"}"}, `component "x" ended: boom`},
		{"nested conductor, console with time and name", []string{"2026-11-27T10:51:25.843Z\tERROR\tinner\tthe chain cannot start\t{\"error\": \"no agent\"}"}, "the chain cannot start: no agent"},
		{"nested conductor, json", []string{`{"level":"error","ts":"2026-11-27T10:51:25.843Z","logger":"inner","msg":"conductor failed","error":"component \"x\" ended: boom"}`}, `component "x" ended: boom`},
		{"our info line", []string{"INFO\tstopped\t{\"error\": \"context canceled\"}"}, `INFO stopped {"error": "context canceled"}`},
		{"our error line without an error", []string{`{"level":"error","msg":"conductor failed"}`}, `{"level":"error","msg":"conductor failed"}`},
		{"nested conductor, long", []string{"ERROR\tconductor failed\t{\"error\": \"" + strings.Repeat("x", 300) + ": boom\"}"}, "..." + strings.Repeat("x", maxCause-len("...: boom")) + ": boom"},
	}
	for _, tt := range tests {
		if got := stderrCause(tt.lines); got != tt.want {
			t.Errorf("%s: stderrCause = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestOneLineBound: a long line is cut to the bound on a character
// boundary, and marked.
func TestOneLineBound(t *testing.T) {
	for _, s := range []string{strings.Repeat("x", 500), strings.Repeat("é", 500), "x" + strings.Repeat("😀", 100), strings.Repeat("y", maxCause)} {
		got := oneLine(s, maxCause)
		if len(got) > maxCause || !utf8.ValidString(got) || !strings.HasPrefix(s, strings.TrimSuffix(got, "...")) ||
			(len(s) > maxCause) != strings.HasSuffix(got, "...") || len(got) < maxCause-len("...")-utf8.UTFMax {
			t.Errorf("oneLine(%.20q... %d bytes) = %q (%d bytes)", s, len(s), got, len(got))
		}
	}
}

// FuzzStderrCause: whatever a component writes to its stderr, the cause an
// error's message carries is one line of valid UTF-8, with no control or
// bidirectional formatting character, no longer than maxCause bytes, and
// empty only when nothing is left of any line on one line.
func FuzzStderrCause(f *testing.F) {
	f.Add("boom")
	f.Add("panic: x\n\ngoroutine 1 [running]:\nmain.main()\n\t/x.go:1")
	f.Add("Error: 401\n    at f (a.js:1:1)\n\nNode.js v22")
	f.Add("\x1b[31merror:\x1b[0m\tno\r")
	f.Add(strings.Repeat("é", 150) + "\xff\u202e")
	f.Fuzz(func(t *testing.T, stderr string) {
		lines := strings.Split(stderr, "\n")
		got := stderrCause(lines)
		if !utf8.ValidString(got) || len(got) > maxCause || strings.ContainsAny(got, "\n\r\t\x00\x1b\u202e") {
			t.Fatalf("stderrCause(%q) = %q", lines, got)
		}
		blank := true
		for _, l := range lines {
			blank = blank && oneLine(l, maxCause) == ""
		}
		if got == "" && !blank {
			t.Fatalf("stderrCause(%q) is empty", lines)
		}
	})
}

// TestLogLevel: a line our own logger wrote, console or json, with or
// without the time and the logger's name, is read for its level, which
// its text loses; a level past error reads as error; other lines are not
// log lines of ours.
func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // "" for no log line of ours
		text string // the line without its level
	}{
		{"WARN\tstopped: slow\t{\"took\": 1}", "warn", "stopped: slow\t{\"took\": 1}"},
		{"2026-11-27T11:46:05.210Z\tERROR\tinner\tconductor failed\t{\"error\": \"x\"}", "error", "2026-11-27T11:46:05.210Z\tinner\tconductor failed\t{\"error\": \"x\"}"},
		{"DEBUG\tstarted component", "debug", "started component"},
		{"FATAL\tgave up", "error", "gave up"},
		{"INFO\tthe WARN\tin the text stays", "info", "the WARN\tin the text stays"},
		{`{"level":"warn","msg":"dropped"}`, "warn", `{"msg":"dropped"}`},
		{`{"level":"panic","logger":"inner","msg":"oops"}`, "error", `{"logger":"inner","msg":"oops"}`},
		{`{"msg":"level elsewhere","level":"warn"}`, "warn", `{"msg":"level elsewhere","level":"warn"}`},
		{`{"level":"info"}`, "", ""},
		{`{"level":"WARN","msg":"not zap's json"}`, "", ""},
		{"warn\tlower case is not the console's", "", ""},
		{"\tindented", "", ""},
		{"WARN", "", ""},
		{"boom: the proxy gave up", "", ""},
		{"Error: something", "", ""},
	} {
		level, text, ok := logLevel(tt.line)
		got := ""
		if ok {
			got = level.String()
		}
		if got != tt.want || text != tt.text {
			t.Errorf("logLevel(%q) = %q, %q; want %q, %q", tt.line, got, text, tt.want, tt.text)
		}
	}
}
