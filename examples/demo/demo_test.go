package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/examples/demo/internal/samples"
)

// binary is the demo built for these tests, with acp-conductor beside it as
// make demo builds them: the demo is tested as a user runs it.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-conductor-demo-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "demo")
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../../cmd/acp-conductor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the demo and acp-conductor: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// demo runs the demo binary with args and extra environment, bounded in time.
func demo(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %q: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// cleanEnv is the environment without any ACP_CONDUCTOR_ setting the
// developer running the tests may have.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// TestDemo runs the demo end to end: a real conductor process, running two
// of the example proxies (context-injector from the demo's binary, and
// permission-policy with python3) next to the sample proxy and sample
// agent, driven by the sample client. Without a usable python3 the demo
// leaves permission-policy out, and TestDemoWithoutPython checks that.
func TestDemo(t *testing.T) {
	if _, err := findPython(t.Context()); err != nil {
		t.Skipf("the demo would skip permission-policy: %v", err)
	}
	r := demo(t, nil, "--timeout", "30s", "--prompt", "Summarize the README")
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// In order: the chain, the prompt as the agent received it with the
	// instructions and the proxy's note put in front, the permission that
	// permission-policy granted without asking the client, the file read,
	// the MCP tool, the end of turn and what permission-policy logged.
	checkTranscript(t, r.stdout,
		"Chain: client → acp-conductor → context-injector → permission-policy → sample-proxy → sample-agent\n",
		"  permission-policy  ",
		`{"rules": [{"kind": "read", "choose": "allow_once"}]}`,
		"→ session/prompt: Summarize the README\n",
		"← agent: I received your prompt:\n",
		"> "+samples.ProxyNote+"\n",
		"> Project instructions from ", "/project/AGENTS.md:\n",
		"> # Instructions for agents\n",
		"> - Read README.md before you answer.\n",
		"> Summarize the README\n",
		"← tool call call_1 [pending]: Read ", "/project/README.md\n",
		"← agent: Permission granted (allow-once), so I am reading it through your client.\n",
		"← fs/read_text_file ", "/project/README.md\n",
		"→ file contents:",
		"← tool call call_1 [completed]",
		"← tool call call_2 [completed]: sample-proxy has passed on 1 prompt(s) in session sess_1.\n",
		"← stop reason: end_turn\n",
		"permission-policy's log",
		"permission-policy: rule 1: allow_once for read 'Read ", "/project/README.md'\n",
		"Demo finished:\n",
		"- permission-policy answered the agent's permission request itself, with allow-once\n",
	)
	if strings.Contains(r.stdout, "session/request_permission") || strings.Contains(r.stdout, "→ permission:") {
		t.Errorf("permission-policy should have answered the permission request, but the client was asked:\n%s", r.stdout)
	}
	checkCleanedUp(t, r.stdout)
	if r.stderr != "" {
		t.Errorf("demo is quiet without --verbose, but wrote to stderr:\n%s", r.stderr)
	}
}

// TestDemoWithoutPython runs the demo where python3 is missing, too old or
// broken: it says why it leaves permission-policy out, the client answers
// the permission request, and everything else happens as usual.
func TestDemoWithoutPython(t *testing.T) {
	fake := func(script string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, path, why string
	}{
		{"missing", t.TempDir(), "python3 is not installed (not found in PATH)"},
		{"old", fake("echo 3.6\n"), "is version 3.6, and permission-policy needs 3.8 or newer"},
		{"broken", fake("echo 'pyenv: python3: command not found' >&2; exit 127\n"), "does not run: pyenv: python3: command not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := demo(t, []string{"PATH=" + tc.path}, "--timeout", "30s")
			if r.code != 0 {
				t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			first, _, _ := strings.Cut(r.stdout, "\n")
			if !strings.HasPrefix(first, "Skipped permission-policy (examples/proxies/permission-policy): ") ||
				!strings.Contains(first, tc.why) || !strings.HasSuffix(first, "; the client answers the permission request itself.") {
				t.Errorf("first line: %q, want the reason permission-policy was skipped: %q", first, tc.why)
			}
			checkTranscript(t, r.stdout,
				"Chain: client → acp-conductor → context-injector → sample-proxy → sample-agent\n",
				"> "+samples.ProxyNote+"\n",
				"> Project instructions from ", "/project/AGENTS.md:\n",
				"> What is this project about?\n",
				"← session/request_permission for tool call call_1",
				"→ permission: allow-once\n",
				"← agent: Permission granted (allow-once)",
				"← fs/read_text_file ", "/project/README.md\n",
				"← tool call call_2 [completed]",
				"← stop reason: end_turn\n",
				"- The client granted 1 permission request(s) (permission-policy was skipped).\n",
			)
			if strings.Contains(r.stdout, "permission-policy's log") {
				t.Errorf("permission-policy was skipped, yet its log is shown:\n%s", r.stdout)
			}
			checkCleanedUp(t, r.stdout)
		})
	}
}

// checkTranscript checks that the transcript holds each of want, in order.
func checkTranscript(t *testing.T, transcript string, want ...string) {
	t.Helper()
	rest := transcript
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("transcript lacks, in order, %q\ntranscript:\n%s", w, transcript)
		}
		rest = rest[i+len(w):]
	}
}

// checkCleanedUp checks that the demo removed its temporary directory.
func checkCleanedUp(t *testing.T, transcript string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^Project \(the session's cwd\): (/\S+)/project,`).FindStringSubmatch(transcript)
	if m == nil {
		t.Fatalf("the transcript does not say where the project is:\n%s", transcript)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo left %s behind (%v)", m[1], err)
		os.RemoveAll(m[1])
	}
}

func TestDemoVerbose(t *testing.T) {
	r := demo(t, nil, "--verbose")
	if r.code != 0 {
		t.Fatalf("demo exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "started component") || strings.Contains(r.stdout, "started component") {
		t.Errorf("with --verbose the conductor's logs belong on stderr\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "Chain: client → acp-conductor → context-injector → permission-policy") &&
		!strings.Contains(r.stdout, "permission-policy: rule 1: allow_once") {
		t.Errorf("with --verbose the demo still shows what permission-policy logged\nstdout:\n%s", r.stdout)
	}
}

// TestDemoNoConductor runs the demo where no acp-conductor is to be found:
// it says what to do instead.
func TestDemoNoConductor(t *testing.T) {
	alone := filepath.Join(t.TempDir(), "demo")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alone)
	cmd.Env = append(cleanEnv(), "PATH="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 ||
		!strings.Contains(stderr.String(), "acp-conductor is neither beside this program nor in PATH") {
		t.Errorf("got %v, stderr:\n%s", err, &stderr)
	}
}

func TestDemoTimeout(t *testing.T) {
	r := demo(t, nil, "--timeout", "1ms")
	if r.code == 0 || !strings.Contains(r.stderr, "demo failed:\n  the demo did not finish within --timeout 1ms") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestContextInjectorCommand checks the hidden command that runs the
// context-injector example from this binary: its flags are the example's.
func TestContextInjectorCommand(t *testing.T) {
	r := demo(t, nil, "context-injector", "--help")
	if r.code != 0 || !strings.Contains(r.stderr, "usage: context-injector [--file NAME]... [--max-bytes N]") {
		t.Errorf("--help: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = demo(t, nil, "context-injector", "--max-bytes", "0")
	if r.code == 0 || strings.Count(r.stderr, "--max-bytes must be positive") != 1 {
		t.Errorf("--max-bytes 0: exit %d, stderr (want the problem said once):\n%s", r.code, r.stderr)
	}
	r = demo(t, nil, "context-injector") // its input ends at once: a clean end
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("with no input: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestDemoOutputClosed runs the demo with its output piped into a reader
// that goes away at once, as "demo | head" does: it must
// still remove its temporary directory.
func TestDemoOutputClosed(t *testing.T) {
	tmp := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(binary, "--timeout", "30s")
	cmd.Env = append(cleanEnv(), "TMPDIR="+tmp)
	cmd.Stdout = w
	err = cmd.Run()
	w.Close()
	if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("with its output closed the demo ended with %v and left %s behind", err, left[0].Name())
	}
}
