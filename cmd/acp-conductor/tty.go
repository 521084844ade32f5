package main

import (
	"os"

	"golang.org/x/term"
)

// editorMayAsk reports whether a conductor that cannot start should wait
// for an editor's first request on stdin, to answer it with why: not when
// stdin is a terminal, where a person typed the command and reads the
// error on stderr at once, and no editor will write.
func editorMayAsk(stdin *os.File) bool { return !term.IsTerminal(int(stdin.Fd())) }
