package config

import (
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// TestLoadTrace layers the trace settings like every other: flags over the
// environment over the file over defaults, and refuses a bad detail or an
// address other machines could reach.
func TestLoadTrace(t *testing.T) {
	file := "agent: {command: a}\ntrace: {file: /tmp/f.jsons, detail: metadata, serve: '127.0.0.1:0'}\n"
	for _, tc := range []struct {
		name  string
		file  string
		env   map[string]string
		flags []string
		want  Trace
	}{
		{name: "defaults", file: "agent: {command: a}\n", want: Trace{Detail: "full"}},
		{name: "file", file: file, want: Trace{"/tmp/f.jsons", "metadata", "127.0.0.1:0"}},
		{name: "environment over file", file: file,
			env:  map[string]string{"ACP_CONDUCTOR_TRACE_FILE": "/tmp/e.jsons", "ACP_CONDUCTOR_TRACE_DETAIL": "full", "ACP_CONDUCTOR_TRACE_SERVE": "[::1]:9"},
			want: Trace{"/tmp/e.jsons", "full", "[::1]:9"}},
		{name: "flags over environment", file: file,
			env:   map[string]string{"ACP_CONDUCTOR_TRACE_FILE": "/tmp/e.jsons"},
			flags: []string{"--trace=/tmp/x.jsons", "--trace-detail=full", "--trace-serve=localhost:7"},
			want:  Trace{"/tmp/x.jsons", "full", "localhost:7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Load(Options{Mode: conductor.AgentMode, File: writeChain(t, tc.file), Flags: flags(t, tc.flags...)})
			if err != nil {
				t.Fatal(err)
			}
			if c.Trace != tc.want {
				t.Errorf("got %+v, want %+v", c.Trace, tc.want)
			}
		})
	}
	for _, tc := range []struct{ flag, want string }{
		{"--trace-detail=everything", `trace.detail: invalid detail "everything"`},
		{"--trace-serve=0.0.0.0:8080", "not loopback"},
		{"--trace-serve=:8080", "not loopback"},
		{"--trace-serve=example.com:80", "not loopback"},
		{"--trace=/dev/stdout", "standard output"},
	} {
		clearEnv(t)
		_, err := Load(Options{Mode: conductor.AgentMode, Components: []string{"a"}, Flags: flags(t, tc.flag)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.flag, err, tc.want)
		}
	}
	if _, err := Parse("c.yaml", []byte("agent: {command: a}\ntrace: {detail: some}\n")); err == nil || !strings.Contains(err.Error(), "c.yaml:2") {
		t.Errorf("a bad detail in the file: got %v, want it reported on its line", err)
	}
}
