package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDrainAtEditorEOF is a scripted editor that initializes, opens a
// session, then writes a prompt and closes the conductor's stdin at once,
// before any answer. The agent (the
// official TypeScript SDK) takes a second over the prompt. Through 1 and 3
// proxies in Go, Python and Node, all three real answers must arrive, with
// the update the agent streams just before its answer, and the conductor
// must exit 0.
func TestDrainAtEditorEOF(t *testing.T) {
	requireConductor(t)
	requireLibProxy(t)
	tsProxy := func(name string) string { return shellJoin(nodeBin, filepath.Join(peersDir, "mcp_proxy.mjs"), name) }
	// The TypeScript SDK's proxy may deliver a notification after the
	// response that followed it (its handlers run concurrently); the
	// conductor keeps order, but through that proxy only the set is checked.
	cases := []struct {
		name     string
		proxies  []string
		reorders bool
	}{
		{"go", []string{goProxyCmd("go1")}, false},
		{"python", []string{pyProxyCmd("py1")}, false},
		{"node", []string{tsProxy("ts1")}, true},
		{"go python", []string{goProxyCmd("go1"), pyProxyCmd("py2"), libProxyCmd("lib3")}, false},
		{"go python node", []string{goProxyCmd("go1"), pyProxyCmd("py2"), tsProxy("ts3")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			args := agentModeArgs(append(c.proxies, agentCmd("agent"))...)
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(cmd.Environ(), "ACP_IT_CHUNKS=1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			type message struct {
				ID     json.RawMessage
				Method string
				Result struct{ SessionID string }
				Error  *struct{ Message string }
			}
			var got []string
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m message
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("stdout line %q: %v", sc.Text(), err)
				}
				switch {
				case m.Method != "":
					got = append(got, m.Method)
				case m.Error != nil:
					got = append(got, fmt.Sprintf("error %s: %s", m.ID, m.Error.Message))
				default:
					got = append(got, "answer "+string(m.ID))
				}
				if string(m.ID) == "0" {
					fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
				}
				if string(m.ID) == "1" && m.Error == nil {
					// The prompt, then the end of the editor's input at once.
					fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"slow"}]}}`+"\n", m.Result.SessionID)
					stdin.Close()
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("conductor: %v\nstderr:\n%s", err, stderr.String())
			}
			want := "answer 0\nanswer 1\nsession/update\nanswer 2"
			if c.reorders {
				// The SDK proxy may pass the prompt's answer on before the
				// update that preceded it. Once that answer is through,
				// nothing is in flight and the conductor closes inputs; an
				// update the proxy had not yet written is then the proxy's
				// to lose (seen under load). The answers must all arrive.
				got = slices.DeleteFunc(got, func(s string) bool { return s == "session/update" })
				slices.Sort(got)
				want = "answer 0\nanswer 1\nanswer 2"
			}
			if strings.Join(got, "\n") != want {
				t.Errorf("editor got:\n%s\nwant:\n%s\nstderr:\n%s", strings.Join(got, "\n"), want, stderr.String())
			}
		})
	}
}
