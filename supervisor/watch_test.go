//go:build linux

package supervisor

import (
	"strings"
	"testing"
)

func TestEnvNests(t *testing.T) {
	w := &Watch{id: "inner"}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"A=1"}, MarkerEnv + "=inner"},
		{[]string{MarkerEnv + "=outer", "A=1"}, MarkerEnv + "=outer,inner"},
		{[]string{MarkerEnv + "=a", MarkerEnv + "=b"}, MarkerEnv + "=b,inner"},
		{[]string{MarkerEnv + "="}, MarkerEnv + "=inner"},
	} {
		got := w.Env(tc.env)
		if got[len(got)-1] != tc.want {
			t.Errorf("Env(%q) ends with %q, want %q", tc.env, got[len(got)-1], tc.want)
		}
	}
}

func TestHasMarker(t *testing.T) {
	env := func(kv ...string) []byte { return []byte(strings.Join(kv, "\x00") + "\x00") }
	for _, tc := range []struct {
		env  []byte
		want bool
	}{
		{env("A=1", MarkerEnv+"=c1"), true},
		{env(MarkerEnv+"=outer,c1", "B=2"), true},
		{env(MarkerEnv + "=c1,inner"), true},
		{env(MarkerEnv + "=c10"), false},
		{env(MarkerEnv + "=xc1"), false},
		{env("X" + MarkerEnv + "=c1"), false},
		{env("A=" + MarkerEnv + "=c1"), false},
		{env(MarkerEnv+"=c1", MarkerEnv+"=other"), false}, // the last one counts
		{nil, false},
	} {
		if got := hasMarker(tc.env, "c1"); got != tc.want {
			t.Errorf("hasMarker(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
}
