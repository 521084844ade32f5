//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestSuperviseUsage: the hidden watchdog command's help and its usage
// error name both command lines it accepts. (Elsewhere than on Linux the
// command only says it is not supported.)
func TestSuperviseUsage(t *testing.T) {
	const usage = "acp-conductor component-supervisor --watch ID | --sweep ID [MSG...]"
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"component-supervisor", "--help"}, 0, "Usage:\n  " + usage + "\n", ""},
		{[]string{"help", "component-supervisor"}, 0, "Usage:\n  " + usage + "\n", ""},
		{[]string{"component-supervisor", "--watch"}, 1, "", "usage: " + usage + "\n"},
	} {
		r := acp(t, "", nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%q: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout with %q, stderr with %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
