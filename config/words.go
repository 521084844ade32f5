package config

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// errUnbalanced is a quote or escape that the component's string ends in.
var errUnbalanced = errors.New("unbalanced quote, escape or parenthesis")

// splitWords splits s into words as a POSIX shell does (and the Rust
// conductor's shell-words), without expanding anything: a backslash
// outside quotes takes the next character as it is (\t is t) and before a
// newline is nothing; single quotes keep everything; in double quotes a
// backslash escapes only $, `, ", \ and a newline, and is kept before
// anything else ("a\.b" is a\.b). Spaces, tabs, newlines and carriage
// returns separate words.
//
// What a shell would not take as a word is refused rather than guessed
// at: an unquoted operator (; & | < >), parenthesis or backquote (command
// substitution), and a # that begins a word (a comment), with the
// character where it stands, counted from 1. Bytes that are not valid
// UTF-8 are kept, as a shell keeps them.
func splitWords(s string) ([]string, error) {
	var (
		words  []string
		word   strings.Builder
		inWord bool
	)
	rs := []byte(s) // the syntax is ASCII: other bytes, valid UTF-8 or not, are kept as they are
	refuse := func(i int, what string) error {
		return fmt.Errorf("unquoted %s at character %d; components are not run by a shell, so quote it", what, utf8.RuneCount(rs[:i])+1)
	}
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words, inWord = append(words, word.String()), false
				word.Reset()
			}
		case '\\':
			if i++; i == len(rs) {
				return nil, errUnbalanced
			}
			if rs[i] != '\n' { // backslash-newline continues the line
				word.WriteByte(rs[i])
				inWord = true
			}
		case '\'':
			inWord = true
			for i++; ; i++ {
				if i == len(rs) {
					return nil, errUnbalanced
				}
				if rs[i] == '\'' {
					break
				}
				word.WriteByte(rs[i])
			}
		case '"':
			inWord = true
			for i++; ; i++ {
				if i == len(rs) {
					return nil, errUnbalanced
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
				word.WriteByte(rs[i])
			}
		case ';', '&', '|', '<', '>':
			return nil, refuse(i, "shell operator")
		case '(', ')':
			return nil, refuse(i, "parenthesis")
		case '`':
			return nil, refuse(i, "backquote")
		case '#':
			if !inWord {
				return nil, refuse(i, "# (a comment in a shell)")
			}
			word.WriteByte(c)
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
