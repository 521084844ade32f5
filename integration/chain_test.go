package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChain runs the SDK client against the SDK agent through the conductor
// with 0, 1 and 3 proxies, Go and Python mixed. The conversation covers
// streamed updates, end_turn, a session/request_permission and two
// fs/read_text_file calls from the agent that must cross the whole chain
// backwards to the client and their answers forwards again, and text that
// JSON escapes differently in each language.
func TestChain(t *testing.T) {
	requireConductor(t)
	cases := []struct {
		name    string
		lib     bool // needs the proxy-library passthrough
		proxies func() []string
	}{
		{"0 proxies", false, func() []string { return nil }},
		{"1 go proxy", false, func() []string { return []string{goProxyCmd("go1")} }},
		{"1 python proxy", false, func() []string { return []string{pyProxyCmd("py1")} }},
		{"1 proxy-library proxy", true, func() []string { return []string{libProxyCmd("lib1")} }},
		{"3 proxies go-python-go", false, func() []string {
			return []string{goProxyCmd("go1"), pyProxyCmd("py2"), goProxyCmd("go3")}
		}},
		{"3 proxies library-python-go", true, func() []string {
			return []string{libProxyCmd("lib1"), pyProxyCmd("py2"), goProxyCmd("go3")}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.lib {
				requireLibProxy(t)
			}
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			cfg := conversationConfig(t, "chain")
			withMarker(t, &cfg)
			argv := agentModeArgs(append(c.proxies(), agentCmd("agent"))...)
			s := runClient(t, ctx, cfg, argv)
			checkConversation(t, s, cfg)
			if s.exitCode() != 0 {
				t.Errorf("conductor exit after stdin closed: %s", s.exitString())
			}
		})
	}
}

// TestNullErrorAnswers runs the SDK client and the SDK agent each writing
// every result it answers with beside "error": null, which the SDK refuses
// to read (-32600: a response must have exactly one of result and error).
// Straight from one to the other the conversation fails at initialize;
// through the conductor, with 0 and 1 proxies, it runs whole: each answer
// reaches the other side without the member.
func TestNullErrorAnswers(t *testing.T) {
	requireConductor(t)
	agentArgs := []string{nodeBin, filepath.Join(peersDir, "agent.mjs"), "--name", "agent", "--null-error"}
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t, 60*time.Second)
		cfg := conversationConfig(t, "null-error")
		cfg.NullError = true
		withMarker(t, &cfg)
		s := startClient(t, ctx, cfg, agentArgs).wait(t)
		if !slices.ContainsFunc(s.Failures, func(f string) bool { return strings.Contains(f, "Invalid request") }) {
			t.Errorf("straight to the agent, the client failed with %q, want the SDK's Invalid request (-32600) for initialize's answer", s.Failures)
		}
	})
	for _, c := range []struct {
		name    string
		proxies []string
	}{
		{"0 proxies", nil},
		{"1 go proxy", []string{goProxyCmd("go1")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			cfg := conversationConfig(t, "null-error")
			cfg.NullError = true
			withMarker(t, &cfg)
			s := runClient(t, ctx, cfg, agentModeArgs(append(c.proxies, shellJoin(agentArgs...))...))
			checkConversation(t, s, cfg)
			if s.exitCode() != 0 {
				t.Errorf("conductor exit after stdin closed: %s", s.exitString())
			}
		})
	}
}

// TestByteOrderMark runs the SDK client and the SDK agent each starting its
// output with a UTF-8 byte order mark, as a .NET program's output starts
// once Console.OutputEncoding is UTF-8. The SDK reads each line past one,
// so straight to each other they talk as usual; through the conductor, with
// 0 and 1 (Go) proxies, the whole conversation runs too: the mark is not
// taken for the start of a line that is not JSON, which would lose the
// agent's answer to initialize and leave the editor's initialize unanswered.
func TestByteOrderMark(t *testing.T) {
	requireConductor(t)
	agentArgs := []string{nodeBin, filepath.Join(peersDir, "agent.mjs"), "--name", "agent", "--bom"}
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"direct", agentArgs},
		{"0 proxies", agentModeArgs(shellJoin(agentArgs...))},
		{"1 go proxy", agentModeArgs(goProxyCmd("go1"), shellJoin(agentArgs...))},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			cfg := conversationConfig(t, "bom")
			cfg.BOM, cfg.TimeoutMs = true, 20000
			withMarker(t, &cfg)
			s := runClient(t, ctx, cfg, c.argv)
			checkConversation(t, s, cfg)
			if s.exitCode() != 0 {
				t.Errorf("exit after stdin closed: %s", s.exitString())
			}
		})
	}
}

// TestMalformedErrorAnswers runs the SDK client and the SDK agent, which
// refuses one prompt with its error written as "error": null, no JSON-RPC
// error. Straight to the agent the SDK client fails that prompt with its
// own Invalid request (-32600), which names nobody; through the conductor,
// with 0 and 1 proxies, with the conductor's -32603, which names the agent
// and says its answer was malformed. The prompts around it end as usual.
func TestMalformedErrorAnswers(t *testing.T) {
	flawedAnswer(t, "--malformed-error", "please fail",
		`-32603 component "agent" answered with a malformed error, not an object with an integer code and a string message`)
}

// TestUnversionedAnswer runs the SDK client and the SDK agent, which
// answers one prompt without the "jsonrpc" member. Straight to the agent
// the SDK client fails that prompt with its own Invalid request (-32600);
// through the conductor, with 0 and 1 proxies, with the conductor's
// -32603, which names the agent and says why, rather than leaving it
// unanswered. The prompts around it end as usual.
func TestUnversionedAnswer(t *testing.T) {
	flawedAnswer(t, "--unversioned", "answer unversioned",
		`-32603 component "agent" answered with a message that is not JSON-RPC 2.0 ("jsonrpc" must be "2.0")`)
}

// flawedAnswer runs the SDK client over three prompts, straight to the SDK
// agent run with flag and through the conductor with 0 and 1 proxies. The
// agent answers the middle one, trigger, badly: straight to it the SDK
// client fails that prompt with its own -32600, through the conductor with
// an error starting with want. The prompts around it end as usual.
func flawedAnswer(t *testing.T, flag, trigger, want string) {
	requireConductor(t)
	agentArgs := []string{nodeBin, filepath.Join(peersDir, "agent.mjs"), "--name", "agent", flag}
	for _, c := range []struct {
		name string
		argv []string
		want string // what the flawed prompt's error starts with
	}{
		{"direct", agentArgs, "-32600 Invalid request"},
		{"0 proxies", agentModeArgs(shellJoin(agentArgs...)), want},
		{"1 go proxy", agentModeArgs(goProxyCmd("go1"), shellJoin(agentArgs...)), want},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			cfg := clientConfig{Prompts: []string{"hello", trigger, "hello again"}, TimeoutMs: 20000}
			withMarker(t, &cfg)
			s := startClient(t, ctx, cfg, c.argv).wait(t)
			if len(s.Sessions) != 1 || len(s.Sessions[0].Prompts) != 3 {
				t.Fatalf("sessions %+v, want one with three prompts; failures %q", s.Sessions, s.Failures)
			}
			for i, p := range s.Sessions[0].Prompts {
				switch {
				case i == 1 && (p.Error == nil || !strings.HasPrefix(*p.Error, c.want)):
					t.Errorf("the prompt %q ended %s, error %s; want the error %q", trigger, orNull(p.StopReason), orNull(p.Error), c.want)
				case i != 1 && (p.StopReason == nil || *p.StopReason != "end_turn"):
					t.Errorf("prompt %q ended %s, error %s; want end_turn", p.Text, orNull(p.StopReason), orNull(p.Error))
				}
			}
			if s.exitCode() != 0 {
				t.Errorf("exit after stdin closed: %s", s.exitString())
			}
		})
	}
}

// orNull returns *s quoted, or null.
func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}

// TestNestedConductor puts a conductor in proxy mode inside the chain:
//
//	acp-conductor agent "<go proxy>" "acp-conductor proxy '<python proxy>' '<go proxy>'" "<agent>"
//
// The inner conductor is one component of the outer one; its last proxy's
// successor traffic must go up to the outer conductor and on to the agent.
func TestNestedConductor(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	cfg := conversationConfig(t, "nested")
	withMarker(t, &cfg)
	argv := agentModeArgs(
		goProxyCmd("outer-go"),
		nestedCmd(pyProxyCmd("inner-py"), goProxyCmd("inner-go")),
		agentCmd("agent"),
	)
	s := runClient(t, ctx, cfg, argv)
	checkConversation(t, s, cfg)
	if s.exitCode() != 0 {
		t.Errorf("conductor exit after stdin closed: %s", s.exitString())
	}
}

// TestConcurrentSessions runs many sessions at once through two proxies and
// checks, from the order in which lines reached the client, that every
// prompt's updates arrived complete, in order, and before its response.
func TestConcurrentSessions(t *testing.T) {
	requireConductor(t)
	cases := []struct {
		name    string
		lib     bool
		proxies func() []string
	}{
		{"go-python", false, func() []string { return []string{goProxyCmd("go1"), pyProxyCmd("py2")} }},
		{"library-python", true, func() []string { return []string{libProxyCmd("lib1"), pyProxyCmd("py2")} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.lib {
				requireLibProxy(t)
			}
			t.Parallel()
			concurrentSessions(t, append(c.proxies(), agentCmd("agent")))
		})
	}
}

func concurrentSessions(t *testing.T, components []string) {
	const sessions, prompts, chunks = 20, 5, 20
	ctx := testContext(t, 180*time.Second)
	cfg := clientConfig{Mode: "concurrent", Sessions: sessions, PromptsPerSession: prompts, Chunks: chunks}
	withMarker(t, &cfg)
	s := runClient(t, ctx, cfg, agentModeArgs(components...))
	if len(s.Sessions) != sessions {
		t.Fatalf("got %d sessions, want %d", len(s.Sessions), sessions)
	}
	seen := map[string]bool{}
	for _, sess := range s.Sessions {
		if seen[sess.SessionID] {
			t.Errorf("duplicate session id %s", sess.SessionID)
		}
		seen[sess.SessionID] = true
		if len(sess.Prompts) != prompts {
			t.Errorf("session %s: %d prompts", sess.SessionID, len(sess.Prompts))
			continue
		}
		for _, p := range sess.Prompts {
			if p.StopReason == nil || *p.StopReason != "end_turn" || len(p.Updates) != chunks {
				t.Errorf("%s: stopReason %v error %v, %d updates", p.Tag, p.StopReason, p.Error, len(p.Updates))
			}
		}
	}
	// Ordering itself is checked by the client, on the wire; its findings are
	// in s.Failures, which runClient reports. The SDK's own dispatch order is
	// reported for information only.
	if string(s.SDKReorders) != "[]" {
		t.Logf("SDK-level dispatch reordering (not a conductor fault): %s", s.SDKReorders)
	}
	if want := 1 + sessions + sessions*prompts*(chunks+1); s.WireMessages != want {
		t.Errorf("client received %d messages, want %d", s.WireMessages, want)
	}
	if s.exitCode() != 0 {
		t.Errorf("conductor exit after stdin closed: %s", s.exitString())
	}
	t.Logf("%s", fmt.Sprintf("%d sessions x %d prompts x %d updates: %d messages to the client", sessions, prompts, chunks, s.WireMessages))
}
