package config

import (
	"slices"
	"testing"
)

// TestUnknownEnv reports an ACP_CONDUCTOR_ variable no setting reads, and
// not those the conductor sets for the processes it starts (a nested
// conductor inherits them).
func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"ACP_CONDUCTOR_SHUTDOWN_GRACE=1s",
		"ACP_CONDUCTOR_CHAIN=1f,2e",
		"ACP_CONDUCTOR_COMPONENT=1f.2,2e.1", // a nested conductor's, set by its parent
		"ACP_CONDUCTOR_SHUTDOWN_GARCE=1s",
		"HOME=/root",
	})
	if want := []string{"ACP_CONDUCTOR_SHUTDOWN_GARCE"}; !slices.Equal(got, want) {
		t.Errorf("UnknownEnv = %q, want %q", got, want)
	}
}

// TestLogFileHintEmptyEnv: an empty ACP_CONDUCTOR_LOGGING_FILE counts as
// unset, as it does for every setting: the chain file's log file is the
// hint.
func TestLogFileHintEmptyEnv(t *testing.T) {
	t.Setenv("ACP_CONDUCTOR_LOGGING_FILE", "")
	path := writeChain(t, "agent: {command: a}\nlogging: {file: /tmp/from-file.log}\n")
	if got := LogFileHint(path, nil); got != "/tmp/from-file.log" {
		t.Errorf("LogFileHint = %q, want the file's", got)
	}
}
