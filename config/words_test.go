package config

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// posixWords splits s as a POSIX shell (and the Rust conductor's
// shell-words) splits a command's words, written as the shell grammar
// reads, character by character. It refuses what a shell would expand, run
// or redirect rather than take as a word: an unquoted operator, parenthesis,
// backquote or comment, an unfinished quote or escape. It is the reference
// the fuzz tests below hold ParseComponent to.
func posixWords(s string) ([]string, bool) {
	var (
		words  []string
		word   []byte
		inWord bool
	)
	rs := []byte(s)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words, word, inWord = append(words, string(word)), nil, false
			}
		case '\\':
			if i+1 == len(rs) {
				return nil, false
			}
			i++
			if rs[i] == '\n' { // a line continuation: nothing
				continue
			}
			word, inWord = append(word, rs[i]), true
		case '\'':
			end := slices.Index(rs[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			word, inWord = append(word, rs[i+1:i+1+end]...), true
			i += end + 1
		case '"':
			inWord = true
			for i++; ; i++ {
				if i == len(rs) {
					return nil, false
				}
				if rs[i] == '"' {
					break
				}
				if rs[i] == '\\' && i+1 < len(rs) {
					switch rs[i+1] {
					case '$', '`', '"', '\\':
						i++
					case '\n':
						i++
						continue
					}
				}
				word = append(word, rs[i])
			}
		case ';', '&', '|', '<', '>', '(', ')', '`':
			return nil, false
		case '#':
			if !inWord {
				return nil, false
			}
			word = append(word, c)
		default:
			word, inWord = append(word, c), true
		}
	}
	if inWord {
		words = append(words, string(word))
	}
	return words, true
}

// shellQuote quotes w as one word of the shell language.
func shellQuote(w string) string {
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// FuzzParseComponent holds ParseComponent to a POSIX shell's splitting
// (posixWords): it takes the words a shell would, and only where a shell
// would take words and run nothing else. What it accepts has a command and
// well-formed variable names.
func FuzzParseComponent(f *testing.F) {
	f.Add(`FOO=1 my-agent --acp 'a b'`)
	f.Add(`run "a\.b" \t "C:\new" a\` + "\n" + `b`)
	f.Add(`run "\$x" "\"" '\' "a\` + "\n" + `b"`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseComponent(s)
		want, ok := posixWords(s)
		if IsRemote(s) {
			return
		}
		if ok {
			shellAgrees(t, s, want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), fmt.Sprintf("component %q: ", s)) {
			t.Fatalf("ParseComponent(%q): %v does not name the component", s, err)
		}
		if err != nil {
			// What stops a component from being started at all (no
			// command, a NUL byte) is refused however it is spelled.
			if ok && len(want) > 0 && !strings.Contains(err.Error(), "NUL") && !strings.Contains(err.Error(), "command") {
				t.Fatalf("ParseComponent(%q) refused %q: %v", s, want, err)
			}
			return
		}
		if !ok {
			t.Fatalf("ParseComponent(%q) accepted %q %q, which a shell does not read as words alone", s, c.Command, c.Args)
		}
		got := append([]string{c.Command}, c.Args...)
		env := want[:max(0, len(want)-len(got))]
		if !slices.Equal(got, want[len(env):]) {
			t.Fatalf("ParseComponent(%q) = %q %q; a shell reads %q", s, c.Command, c.Args, want)
		}
		for _, w := range env {
			name, value, ok := envWord(w)
			if !ok || c.Env[name] != value && !slices.ContainsFunc(env, func(l string) bool { return strings.HasPrefix(l, name+"=") && l != w }) {
				t.Fatalf("ParseComponent(%q): word %q is not in env %q", s, w, c.Env)
			}
		}
		if strings.TrimSpace(c.Command) == "" {
			t.Fatalf("ParseComponent(%q) accepted an empty command", s)
		}
		if _, _, ok := envWord(c.Command); ok {
			t.Fatalf("ParseComponent(%q) left assignment %q as the command", s, c.Command)
		}
		for name := range c.Env {
			if !isShellName(name) {
				t.Fatalf("ParseComponent(%q) accepted variable name %q", s, name)
			}
		}
	})
}

// FuzzComponentWords: words quoted as a shell reads them (a NUL between
// two) come back from ParseComponent as they were.
func FuzzComponentWords(f *testing.F) {
	f.Add("my-agent\x00--acp\x00a b")
	f.Add("run\x00it's\x00\\t\x00\"\\\"\x00\x00$(x)")
	f.Fuzz(func(t *testing.T, words string) {
		ws := strings.Split(words, "\x00")
		if _, _, isEnv := envWord(ws[0]); isEnv || strings.TrimSpace(ws[0]) == "" || IsRemote(ws[0]) {
			return // not a command
		}
		quoted := make([]string, len(ws))
		for i, w := range ws {
			quoted[i] = shellQuote(w)
		}
		line := strings.Join(quoted, " ")
		if got, ok := posixWords(line); !ok || !slices.Equal(got, ws) {
			t.Fatalf("the reference reads %q as %q, want %q", line, got, ws)
		}
		c, err := ParseComponent(line)
		if err != nil || c.Command != ws[0] || !slices.Equal(append([]string{c.Command}, c.Args...), ws) {
			t.Fatalf("ParseComponent(%q) = %q %q, %v; want %q", line, c.Command, c.Args, err, ws)
		}
	})
}

// shellAgrees holds the reference to /bin/sh itself, for a line the shell
// reads as words alone (nothing it would expand, and on one line: a
// newline ends a shell's command, and a carriage return is no space to
// it): the words printf is given after the line are those the reference
// found.
func shellAgrees(t *testing.T, line string, want []string) {
	t.Helper()
	if strings.ContainsAny(line, "$`*?[]{}~!\x00\n\r") {
		return
	}
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' x `+line).Output()
	if err != nil {
		t.Fatalf("sh -c printf ... %q: %v", line, err)
	}
	got := strings.Split(string(bytes.TrimSuffix(out, []byte{0})), "\x00")[1:]
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("/bin/sh reads %q as %q; the reference as %q", line, got, want)
	}
}

// TestWordsAsShell: lines a shell reads as words, split as /bin/sh splits
// them.
func TestWordsAsShell(t *testing.T) {
	for _, line := range []string{
		`my-agent --acp 'a b'`,
		`run "a\.b" \t "C:\new" a\\b`,
		`run "\"" '\' "a\\" its\ ok`,
		`FOO=1 BAR="x y" agent`,
		`a"b"'c'd e\ f "" ''`,
		`x#y 'say "hi"' "it's"`,
	} {
		want, ok := posixWords(line)
		if !ok {
			t.Fatalf("the reference refuses %q", line)
		}
		shellAgrees(t, line, want)
		got, err := splitWords(line)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitWords(%q) = %q, %v; the shell reads %q", line, got, err, want)
		}
	}
}
