//go:build unix

package conductor

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestStderrLongLine: a component's stderr line longer than maxStderrLine
// is logged cut short, with a warning that says how long it was, and the
// lines after it are logged as ever. A line of exactly the limit is logged
// whole, its newline LF or CR LF. The component is a real child writing
// to a real pipe.
func TestStderrLongLine(t *testing.T) {
	// xs writes n bytes of x without a newline.
	xs := func(n int) string {
		return "dd if=/dev/zero bs=1024 count=" + strconv.Itoa(n/1024) + " 2>/dev/null | tr '\\0' x >&2; "
	}
	type logged struct {
		level zapcore.Level
		text  string // the message, or for a cut line its kept text
		bytes int64  // for a cut line, its whole length
	}
	summary := func(ls []logged) string {
		var b strings.Builder
		for _, l := range ls {
			fmt.Fprintf(&b, "[%v %.40q (%d bytes; %d in all)] ", l.level, l.text, len(l.text), l.bytes)
		}
		return b.String()
	}
	tests := []struct {
		name   string
		script string
		want   []logged
	}{
		{"a 2 MiB line, then a short one",
			"echo before >&2; " + xs(2<<20) + "printf '\\nafter the long line\\n' >&2",
			[]logged{{zapcore.InfoLevel, "before", 0}, {zapcore.WarnLevel, strings.Repeat("x", maxStderrLine), 2 << 20}, {zapcore.InfoLevel, "after the long line", 0}}},
		{"a line of exactly the limit",
			xs(maxStderrLine) + "printf '\\nafter\\n' >&2",
			[]logged{{zapcore.InfoLevel, strings.Repeat("x", maxStderrLine), 0}, {zapcore.InfoLevel, "after", 0}}},
		{"a line of exactly the limit, in CR LF",
			xs(maxStderrLine) + "printf '\\r\\nafter\\r\\n' >&2",
			[]logged{{zapcore.InfoLevel, strings.Repeat("x", maxStderrLine), 0}, {zapcore.InfoLevel, "after", 0}}},
		{"a long last line without its newline",
			"echo before >&2; " + xs(3<<20),
			[]logged{{zapcore.InfoLevel, "before", 0}, {zapcore.WarnLevel, strings.Repeat("x", maxStderrLine), 3 << 20}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := startProcess(Component{Name: "talker", Command: "/bin/sh", Args: []string{"-c", tt.script}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll(p.stdin, p.stdout)
			defer p.wait()
			core, logs := observer.New(zapcore.DebugLevel)
			p.pumpStderr(zap.New(core)) // returns at the end of its stderr
			var got []logged
			for _, e := range logs.All() {
				l := logged{level: e.Level, text: e.Message}
				if e.Level == zapcore.WarnLevel {
					ctx := e.ContextMap()
					l.text, _ = ctx["line"].(string)
					l.bytes, _ = ctx["bytes"].(int64)
					if !strings.Contains(e.Message, "too long") {
						t.Errorf("the warning %q does not say the line was too long", e.Message)
					}
				}
				got = append(got, l)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("logged %d entries, want %d: %s", len(got), len(tt.want), summary(got))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("entry %d: %s, want %s", i, summary(got[i:i+1]), summary(tt.want[i:i+1]))
				}
			}
		})
	}
}

// TestStderrNestedLevel: a nested conductor's log lines, console or
// json, are logged at their own level without it in their text, where
// the outer line says it already; other lines are logged as they came.
func TestStderrNestedLevel(t *testing.T) {
	script := `printf 'WARN\tinner\tdropped notification\t{"method": "x"}\n' >&2; ` +
		`printf '2026-11-27T11:46:05.210Z\tERROR\tconductor failed\n' >&2; ` +
		`printf '{"level":"warn","logger":"inner","msg":"dropped"}\n' >&2; ` +
		`printf 'WARNING: not ours\n' >&2`
	p, err := startProcess(Component{Name: "nested", Command: "/bin/sh", Args: []string{"-c", script}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(p.stdin, p.stdout)
	defer p.wait()
	core, logs := observer.New(zapcore.DebugLevel)
	p.pumpStderr(zap.New(core))
	want := []struct {
		level zapcore.Level
		msg   string
	}{
		{zapcore.WarnLevel, "inner\tdropped notification\t{\"method\": \"x\"}"},
		{zapcore.ErrorLevel, "2026-11-27T11:46:05.210Z\tconductor failed"},
		{zapcore.WarnLevel, `{"logger":"inner","msg":"dropped"}`},
		{zapcore.InfoLevel, "WARNING: not ours"},
	}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("logged %d entries, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("entry %d: %v %q, want %v %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}
