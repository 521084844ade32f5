package chaintest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// ClientConfig is the part of integration/peers/client.mjs's --config these
// tests use: one session, prompts sent in order (see the script's header).
type ClientConfig struct {
	Prompts      []string          `json:"prompts,omitempty"`
	CancelPrompt string            `json:"cancelPrompt,omitempty"`
	Chunks       int               `json:"chunks,omitempty"`
	Files        map[string]string `json:"files,omitempty"`
	Cwd          string            `json:"cwd,omitempty"`
	TimeoutMs    int               `json:"timeoutMs,omitempty"`
}

// A ClientSummary is client.mjs's report.
type ClientSummary struct {
	Initialize json.RawMessage `json:"initialize"`
	Sessions   []struct {
		SessionID string `json:"sessionId"`
		Prompts   []struct {
			Tag        string   `json:"tag"`
			Text       string   `json:"text"`
			StopReason *string  `json:"stopReason"`
			Error      *string  `json:"error"`
			Updates    []int    `json:"updates"`
			Results    []string `json:"results"` // permission-result: and readfile-result: reports
		} `json:"prompts"`
	} `json:"sessions"`
	PermissionRequests []struct {
		SessionID  string   `json:"sessionId"`
		ToolCallID string   `json:"toolCallId"`
		Title      string   `json:"title"`
		Options    []string `json:"options"`
	} `json:"permissionRequests"`
	WireMessages int `json:"wireMessages"` // every message the client received
	Exit         *struct {
		ExitCode *int    `json:"exitCode"`
		Signal   *string `json:"signal"`
	} `json:"exit"`
	Failures []string `json:"failures"`
}

// RunClient runs integration/peers/client.mjs in conversation mode against
// the conductor command argv, and fails t unless the client is satisfied:
// every prompt ended with end_turn, every update arrived in order and before
// its prompt's answer, nothing unexpected arrived, and the conductor exited 0
// when the client closed its stdin.
func (e *Env) RunClient(t testing.TB, ctx context.Context, cfg ClientConfig, argv ...string) *ClientSummary {
	t.Helper()
	if cfg.Cwd == "" {
		cfg.Cwd = t.TempDir()
	}
	if cfg.TimeoutMs == 0 {
		cfg.TimeoutMs = msUntil(ctx)
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{filepath.Join(e.Peers, "client.mjs"), "--config", string(conf), "--"}, argv...)
	last, runErr := e.runNode(t, ctx, args...)
	var s ClientSummary
	if err := json.Unmarshal(last, &s); err != nil {
		t.Fatalf("client.mjs: %v; no summary (last line %q)", runErr, last)
	}
	if runErr != nil || len(s.Failures) > 0 {
		t.Fatalf("client.mjs: %v; failures: %q", runErr, s.Failures)
	}
	if s.Exit == nil || s.Exit.ExitCode == nil || *s.Exit.ExitCode != 0 {
		t.Fatalf("conductor did not exit 0 after its stdin closed: %s", last)
	}
	return &s
}

// A Script is what editor.mjs does: for each session, in order, session/new
// with the given cwd, then its prompts, one after another.
type Script struct {
	Sessions  []ScriptSession `json:"sessions"`
	TimeoutMs int             `json:"timeoutMs,omitempty"`
}

type ScriptSession struct {
	Cwd     string   `json:"cwd"`
	Prompts []string `json:"prompts"`
	// CancelPrompt, if set, is sent after Prompts and cancelled with
	// $/cancel_request once the agent has started on it (see editor.mjs);
	// then AfterCancel are sent.
	CancelPrompt string   `json:"cancelPrompt,omitempty"`
	AfterCancel  []string `json:"afterCancel,omitempty"`
}

// An EditorReport is editor.mjs's report.
type EditorReport struct {
	Initialize json.RawMessage `json:"initialize"`
	Sessions   []struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Prompts   []struct {
			Text       string `json:"text"`
			StopReason string `json:"stopReason"`
			Error      string `json:"error"` // of a cancelled prompt
			// Updates holds the text of each agent_message_chunk of the
			// session, in the order of arrival, between the prompt and its
			// answer.
			Updates []string `json:"updates"`
		} `json:"prompts"`
	} `json:"sessions"`
	PermissionRequests []struct {
		SessionID string   `json:"sessionId"`
		Title     string   `json:"title"`
		Kind      string   `json:"kind"`
		Options   []string `json:"options"`
	} `json:"permissionRequests"`
	Exit *struct {
		Code   *int    `json:"code"`
		Signal *string `json:"signal"`
	} `json:"exit"`
	Failures []string `json:"failures"`
}

// RunEditor runs editor.mjs with script against the conductor command argv,
// and fails t unless every prompt was answered and the conductor exited 0
// when the editor closed its stdin.
func (e *Env) RunEditor(t testing.TB, ctx context.Context, script Script, argv ...string) *EditorReport {
	t.Helper()
	if script.TimeoutMs == 0 {
		script.TimeoutMs = msUntil(ctx)
	}
	conf, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	editor := filepath.Join(e.Root, "examples", "proxies", "internal", "chaintest", "editor.mjs")
	args := append([]string{editor, "--peers", e.Peers, "--script", string(conf), "--"}, argv...)
	last, runErr := e.runNode(t, ctx, args...)
	var r EditorReport
	if err := json.Unmarshal(last, &r); err != nil {
		t.Fatalf("editor.mjs: %v; no report (last line %q)", runErr, last)
	}
	if runErr != nil || len(r.Failures) > 0 {
		t.Fatalf("editor.mjs: %v; failures: %q", runErr, r.Failures)
	}
	if r.Exit == nil || r.Exit.Code == nil || *r.Exit.Code != 0 {
		t.Fatalf("conductor did not exit 0 after its stdin closed: %s", last)
	}
	return &r
}

// msUntil is the time left before ctx's deadline, less a margin for the
// driver to report, in milliseconds.
func msUntil(ctx context.Context) int {
	d, ok := ctx.Deadline()
	if !ok {
		return 60_000
	}
	return int(time.Until(d).Milliseconds()) - 5_000
}
