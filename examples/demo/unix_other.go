//go:build !unix

package main

// The demo runs its conductor in a process group and stops it with
// signals, which only Unix systems have.
import _ "github.com/acp-conductor/acp-conductor/internal/unixonly"
