package config

import (
	"fmt"
	"strings"
)

// A Problem is one thing wrong with a chain, placed as precisely as is known.
type Problem struct {
	File string // chain file, or "" for problems outside any file
	Line int    // 1-based; 0 when the problem has no single line
	Msg  string
}

func (p Problem) String() string {
	switch {
	case p.File != "" && p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	case p.File != "":
		return p.File + ": " + p.Msg
	}
	return p.Msg
}

// Problems is an error listing every problem found, in the order found.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// err returns ps as an error, or nil if it is empty, so callers never hold a
// non-nil error interface wrapping an empty list.
func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}
