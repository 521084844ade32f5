package conductor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap/zapcore"
)

// A namedError is a failure whose message names its component already, so
// that goneError, which names the component it reports, does not name it
// twice.
type namedError struct {
	name string
	err  error
}

func (e *namedError) Error() string { return e.err.Error() }
func (e *namedError) Unwrap() error { return e.err }

// named marks err, whose message names the component name.
func named(name string, err error) error { return &namedError{name: name, err: err} }

// endedError is the failure of a component whose output ended while it was
// still wanted. Editors show an error's message, not its data, so the
// message carries, besides the exit status, the line of the component's
// stderr that most likely says why it ended.
func endedError(name string, exit exitError) error {
	msg := fmt.Sprintf("component %q ended unexpectedly (%s)", name, exit.Status)
	if why := stderrCause(exit.Stderr); why != "" && !killedOutright(exit.Status) {
		msg += ": " + why
	}
	return named(name, errors.New(msg))
}

// killedOutright reports whether status says the process died of SIGKILL
// or of SIGTERM's default action, which it could not have said why on
// its stderr: whatever it printed last ("started", say) would read as
// the cause. A runtime may say why it aborted (SIGABRT) or crashed
// (SIGSEGV), and its line is kept for those.
func killedOutright(status string) bool {
	return status == "signal: "+syscall.SIGKILL.String() || status == "signal: "+syscall.SIGTERM.String()
}

// maxCause bounds the stderr line an error's message carries.
const maxCause = 200

// stderrCause picks, from the last lines of a component's stderr, the one
// that most likely says why it ended: a Go panic's first line; otherwise
// the last line that is not blank nor part of a stack trace (indented, as
// Node's, Python's, Java's and Go's frames are) nor a runtime's trailer
// after one; otherwise the last line that is not blank. It returns it on
// one line, without control characters, cut to maxCause bytes; for an
// error a conductor of ours logged (a nested acp-conductor proxy), the
// error alone (see logCause).
// A line is blank if nothing is left of it on one line: a line of NULs or
// escape codes says no more than an empty one.
func stderrCause(lines []string) string {
	if i := goroutineHeader(lines); i >= 0 {
		for _, l := range lines[:i] {
			if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
				return oneLine(l, maxCause)
			}
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if c := oneLine(lines[i], maxCause); c != "" && !traceLine(lines[i]) {
			if why, ok := logCause(lines[i]); ok {
				return why
			}
			return c
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if c := oneLine(lines[i], maxCause); c != "" {
			return c
		}
	}
	return ""
}

// goroutineHeader returns the index of the first "goroutine N [...]:" of a
// Go stack trace in lines, or -1.
func goroutineHeader(lines []string) int {
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "goroutine "); ok && strings.HasSuffix(l, "]:") &&
			rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			return i
		}
	}
	return -1
}

// traceLine reports whether l is a stack frame or what a runtime prints
// after a trace rather than a cause, or what an argument parser prints
// after its error: a usage block's headings (its entries are indented) and
// the hint to run --help, which would name the cause of every mistake.
// A line with no letter nor digit says no cause either: the "}" that
// closes the properties Node prints after an error's frames, say.
func traceLine(l string) bool {
	if l[0] == ' ' || l[0] == '\t' ||
		strings.HasPrefix(l, "Node.js v") ||
		strings.HasPrefix(l, "note: run with `RUST_BACKTRACE=") ||
		!strings.ContainsFunc(l, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return true
	}
	l = strings.TrimSpace(l)
	for _, p := range usagePrefixes {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return strings.Contains(l, "--help") && (strings.HasPrefix(l, "Run ") || strings.HasPrefix(l, "Use ") ||
		strings.HasPrefix(l, "Try ") || strings.HasPrefix(l, "For more information"))
}

// usagePrefixes begin the lines of a usage block that are not indented, as
// cobra, clap, commander and argparse print them.
var usagePrefixes = []string{"Usage:", "usage:", "Flags:", "Global Flags:", "Options:", "Commands:", "Available Commands:", "Arguments:"}

// logCause returns the error of l if l is an error our own logger wrote
// (cmd/acp-conductor/logging.go: console or json, with or without the
// time and the logger's name), and reports whether it is. A nested
// conductor's last line is its "conductor failed", whose error is the
// cause, raw JSON escapes and all: taken whole, each level of nesting
// would quote the one below until the innermost cause, which is what
// says why, fell past maxCause. So it is unquoted, and kept by its end,
// where the innermost cause is. Messages other than "conductor failed"
// (which the outer error's "ended unexpectedly" says already) stay in
// front of it.
func logCause(l string) (string, bool) {
	var level, msg, why string
	if strings.HasPrefix(l, "{") {
		var e struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(l), &e) != nil {
			return "", false
		}
		level, msg, why = strings.ToUpper(e.Level), e.Msg, e.Error
	} else {
		// [TIME] LEVEL [NAME] MESSAGE FIELDS, tab-separated.
		parts := strings.Split(l, "\t")
		if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", parts[0]); err == nil {
			parts = parts[1:]
		}
		if len(parts) < 3 || len(parts) > 4 || !strings.HasPrefix(parts[len(parts)-1], "{") {
			return "", false
		}
		var f struct{ Error string }
		if json.Unmarshal([]byte(parts[len(parts)-1]), &f) != nil {
			return "", false
		}
		level, msg, why = parts[0], parts[len(parts)-2], f.Error
	}
	switch level {
	case "ERROR", "DPANIC", "PANIC", "FATAL":
	default:
		return "", false
	}
	if why == "" {
		return "", false
	}
	if msg != "conductor failed" {
		why = msg + ": " + why
	}
	why = oneLineTail(why, maxCause)
	return why, why != ""
}

// logLevel returns the level of l if l is a line our own logger wrote
// (cmd/acp-conductor/logging.go: console or json, with or without the
// time and the logger's name), and l without it, and reports whether it
// is. A nested conductor's lines are logged at their own level rather
// than at info, as the rest of a component's stderr is, so that the
// outer conductor's level filters them as the nested one meant: its
// warnings and errors show under an outer warn, its info does not. A
// level past error comes back as error: the outer conductor logs it, it
// does not panic or exit. The text loses the level it was logged at,
// which the outer line says already: "WARN  WARN dropped" says it twice.
func logLevel(l string) (level zapcore.Level, text string, ok bool) {
	var name string
	text = l
	if strings.HasPrefix(l, "{") {
		var e struct {
			Level string
			Msg   *string
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.Msg == nil || e.Level != strings.ToLower(e.Level) {
			return 0, "", false
		}
		name = e.Level
		// zap writes the level first; anywhere else it is left, as
		// cutting a member out of JSON it did not write could break it.
		if rest, ok := strings.CutPrefix(l, `{"level":"`+name+`",`); ok {
			text = "{" + rest
		}
	} else {
		// [TIME] LEVEL [NAME] MESSAGE [FIELDS], tab-separated.
		parts := strings.SplitN(l, "\t", 3)
		at := 0
		if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", parts[0]); err == nil {
			at = 1
		}
		if len(parts) < at+2 || parts[at] != strings.ToUpper(parts[at]) {
			return 0, "", false
		}
		name = parts[at]
		text = strings.Join(slices.Delete(parts, at, at+1), "\t")
	}
	level, err := zapcore.ParseLevel(name) // which takes "" for info
	if err != nil || name == "" {
		return 0, "", false
	}
	return min(level, zapcore.ErrorLevel), text, true
}

// oneLine returns s trimmed, without control or bidirectional formatting
// characters (a tab becomes a space) or invalid UTF-8, and no longer than
// max bytes, cut on a character boundary and marked by "...".
func oneLine(s string, max int) string {
	s = clean(s)
	if len(s) <= max {
		return s
	}
	cut := max - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "..."
}

// oneLineTail is oneLine keeping the end of s, marked at its start.
func oneLineTail(s string, max int) string {
	s = clean(s)
	if len(s) <= max {
		return s
	}
	cut := len(s) - (max - len("..."))
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "..." + strings.TrimSpace(s[cut:])
}

// clean returns s trimmed, without control or bidirectional formatting
// characters (a tab becomes a space) or invalid UTF-8.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), r == utf8.RuneError:
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	return strings.TrimSpace(s)
}
