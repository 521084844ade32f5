package conductor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestCancelRequest cancels a request in each direction and checks, at
// every hop, that exactly one cancel arrived, plain, naming the id that hop
// saw.
func TestCancelRequest(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("%d proxies", n), func(t *testing.T) {
			e, dir := cancellerChain(t, n)
			e.send(`{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
			ask := e.recvMsg()
			if ask.Method != "session/request_permission" {
				t.Fatalf("want permission request, got %s", e.seen[len(e.seen)-1])
			}
			// Agent -> editor: the editor hears of the cancel under its id.
			if c := e.recvMsg(); c.Method != wire.MethodCancelRequest || string(requestID(c.Params)) != string(ask.ID) {
				t.Fatalf("editor got %s, want a cancel for %s", e.seen[len(e.seen)-1], ask.ID)
			}
			// Editor -> agent, plus a cancel for something long finished.
			e.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}`)
			e.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p-1"}}`)
			resp := e.recvMsg()
			if string(resp.ID) != `"p-1"` || !strings.Contains(string(resp.Error), "-32800") {
				t.Fatalf("prompt answer %s", e.seen[len(e.seen)-1])
			}
			e.close()

			for i := range n + 1 {
				name := "agent"
				if i < n {
					name = fmt.Sprintf("p%d", i)
				}
				checkCancels(t, filepath.Join(dir, name+".txt"), i < n)
			}
		})
	}
}

// checkCancels reads one component's transcript and checks that the only
// cancels in it name the prompt it received and, for a proxy, the
// permission request its successor made.
func checkCancels(t *testing.T, path string, proxy bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var promptID, askID string
	var cancels []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m, err := wire.Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		method, params := m.Method, m.Params
		if wire.IsSuccessor(method) {
			method, params, _ = wire.Unwrap(params)
			if method == wire.MethodCancelRequest {
				// The schema cancels a proxy/successor request by its own id,
				// plain; never a cancel inside an envelope.
				t.Errorf("%s: a cancel in an envelope: %s", filepath.Base(path), line)
			}
		}
		switch method {
		case "session/prompt":
			promptID = string(m.ID)
		case "session/request_permission":
			askID = string(m.ID)
		case wire.MethodCancelRequest:
			cancels = append(cancels, string(requestID(params)))
		}
	}
	want := []string{promptID}
	if proxy {
		want = []string{askID, promptID}
	}
	if fmt.Sprint(cancels) != fmt.Sprint(want) {
		t.Errorf("%s: cancels for %v, want %v\n%s", filepath.Base(path), cancels, want, data)
	}
}

// TestCancelSpelledOtherwise: a cancel whose requestId is the request's id
// spelled otherwise (1.0 for 1, "\u0070" for "p") names the same request,
// as the TypeScript SDK reads it, and the agent hears of the cancel under
// the id it saw.
func TestCancelSpelledOtherwise(t *testing.T) {
	for _, n := range []int{0, 1} {
		t.Run(fmt.Sprintf("%d proxies", n), func(t *testing.T) {
			e, _ := cancellerChain(t, n)
			for _, tt := range []struct{ id, cancel string }{
				{`7`, `7.0`},
				{`8`, `8e0`},
				{`9`, `0.9E+1`},
				{`-0`, `0`},
				{`"p-1"`, `"\u0070-1"`},
				{`"\u00e9"`, `"é"`},
			} {
				e.send(`{"jsonrpc":"2.0","id":` + tt.id + `,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
				if ask := e.recvMsg(); ask.Method != "session/request_permission" {
					t.Fatalf("want permission request, got %s", e.seen[len(e.seen)-1])
				}
				if c := e.recvMsg(); c.Method != wire.MethodCancelRequest {
					t.Fatalf("want the agent's cancel of it, got %s", e.seen[len(e.seen)-1])
				}
				e.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + tt.cancel + `}}`)
				// The canceller answers its prompt only when it hears of the cancel.
				resp := e.recvMsg()
				if string(resp.ID) != tt.id || !strings.Contains(string(resp.Error), "-32800") {
					t.Fatalf("prompt %s cancelled as %s: answer %s", tt.id, tt.cancel, e.seen[len(e.seen)-1])
				}
			}
			e.close()
		})
	}
}

// cancellerChain starts an initialized chain of n fake proxies before the
// fake agent that answers a cancelled request with -32800, and returns the
// directory where each writes its transcript (NAME.txt).
func cancellerChain(t *testing.T, n int) (*editor, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Agent: fake(t, dir, "agent", "canceller")}
	for i := range n {
		cfg.Proxies = append(cfg.Proxies, fake(t, dir, fmt.Sprintf("p%d", i), "proxy"))
	}
	e := startChain(t, cfg)
	e.send(initLine)
	e.recvMsg()
	return e, dir
}
