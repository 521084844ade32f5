package samples

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// startAgent runs Agent on a pair of pipes and returns the client's ends.
// The test fails if the agent does not finish cleanly once they are closed.
func startAgent(t *testing.T) (fromAgent io.Reader, toAgent io.WriteCloser) {
	t.Helper()
	return startAgentLimited(t, 0, io.Discard)
}

// startAgentLimited is startAgent with the agent's line limit (0: the
// default), logging to logw.
func startAgentLimited(t *testing.T, limit int, logw io.Writer) (fromAgent io.Reader, toAgent io.WriteCloser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- agentLimited(ctx, inR, outW, limit, logw) }()
	t.Cleanup(func() {
		inW.Close()
		if t.Failed() {
			outR.Close() // nobody may be reading what the agent still sends
		}
		if err := <-done; err != nil && !t.Failed() {
			t.Errorf("Agent: %v", err)
		}
		cancel()
	})
	return outR, inW
}

func TestClientWithAgent(t *testing.T) {
	const cwd = "/work/project"
	for _, tc := range []struct {
		name   string
		client Client
		want   []string // in the transcript, in order
		reads  int
	}{
		{
			name:   "allowed",
			client: Client{Prompt: "What is this project?", Files: map[string]string{cwd + "/README.md": "# Demo\nA project.\n"}},
			want: []string{
				"→ initialize: protocol version 1",
				"← initialized: " + AgentName + " 0.1.0, protocol version 1",
				"→ session/new: cwd /work/project",
				"← session sess_1",
				"→ session/prompt: What is this project?",
				"← agent: I received your prompt:\n         > What is this project?\n         To answer, I need to read /work/project/README.md.\n",
				"← tool call call_1 [pending]: Read /work/project/README.md",
				"← session/request_permission for tool call call_1: allow-once (Allow once), reject-once (Reject)",
				"→ permission: allow-once",
				"← agent: Permission granted (allow-once), so I am reading it through your client.\n",
				"← tool call call_1 [in_progress]",
				"← fs/read_text_file /work/project/README.md",
				"→ file contents: 18 bytes",
				`← tool call call_1 [completed]: has 2 lines; it begins "# Demo".`,
				`← agent: Done: README.md has 2 lines; it begins "# Demo".`,
				"← stop reason: end_turn",
			},
			reads: 1,
		},
		{
			name:   "rejected",
			client: Client{Prompt: "hi", Reject: true},
			want:   []string{"→ permission: reject-once", "← tool call call_1 [failed]", "You declined, so I did not read the file.", "← stop reason: end_turn"},
		},
		{
			name:   "missing file",
			client: Client{Prompt: "hi"},
			want:   []string{"→ error: no such file", "← tool call call_1 [failed]: resource not found: /work/project/README.md", "I could not read it: resource not found", "← stop reason: end_turn"},
		},
		{
			name:   "multi-line prompt",
			client: Client{Prompt: "line one\n\nline three"},
			want:   []string{"← agent: I received your prompt:\n         > line one\n         >\n         > line three\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c := tc.client
			c.Cwd, c.Transcript = cwd, &out
			r, w := startAgent(t)
			res, err := c.Run(context.Background(), r, w)
			if err != nil {
				t.Fatalf("Run: %v\ntranscript:\n%s", err, &out)
			}
			text := out.String()
			pos := 0
			for _, want := range tc.want {
				i := strings.Index(text[pos:], want)
				if i < 0 {
					t.Fatalf("transcript lacks, after byte %d:\n%s\ntranscript:\n%s", pos, want, text)
				}
				pos += i + len(want)
			}
			if res.StopReason != "end_turn" || res.Agent != AgentName || res.SessionID != "sess_1" || len(res.Reads) != tc.reads || len(res.Permissions) != 1 {
				t.Errorf("result = %+v", res)
			}
			if !strings.Contains(res.Reply, "> "+strings.Split(c.Prompt, "\n")[0]) {
				t.Errorf("reply does not echo the prompt: %q", res.Reply)
			}
		})
	}
}

// rawPeer drives the agent message by message.
type rawPeer struct {
	t  *testing.T
	ch *wire.LineChannel
}

func newRawPeer(t *testing.T) *rawPeer {
	r, w := startAgent(t)
	return &rawPeer{t, wire.NewLineChannel(r, w, 0)}
}

func (p *rawPeer) send(line string) {
	p.t.Helper()
	if err := p.ch.Send([]byte(line)); err != nil {
		p.t.Fatal(err)
	}
}

// promptToPermission opens a session (id 1) and prompts in it (id 2),
// then reads until the agent asks the client's permission, and returns
// that request.
func (p *rawPeer) promptToPermission() *wire.Message {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	p.expect(`"sessionId":"sess_1"`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
	for {
		if m, _ := p.recv(); m.Method == "session/request_permission" {
			return m
		}
	}
}

// expectLine reads the agent's next line, which must be want, byte for
// byte.
func (p *rawPeer) expectLine(want string) {
	p.t.Helper()
	line, err := p.ch.Recv()
	if err != nil {
		p.t.Fatalf("Recv: %v", err)
	}
	if string(line) != want {
		p.t.Fatalf("the agent sent\n%s\nwant\n%s", line, want)
	}
}

func (p *rawPeer) recv() (*wire.Message, string) {
	p.t.Helper()
	line, err := p.ch.Recv()
	if err != nil {
		p.t.Fatalf("Recv: %v", err)
	}
	m, err := wire.Parse(line)
	if err != nil {
		p.t.Fatalf("agent sent %s: %v", line, err)
	}
	return m, string(line)
}

// expect receives a message and checks that its text contains each of want.
func (p *rawPeer) expect(want ...string) *wire.Message {
	p.t.Helper()
	m, line := p.recv()
	for _, w := range want {
		if !strings.Contains(line, w) {
			p.t.Fatalf("got %s\nwant it to contain %s", line, w)
		}
	}
	return m
}

func TestAgentErrors(t *testing.T) {
	p := newRawPeer(t)
	p.send(`{not json`)
	p.expect(`"id":null`, `"code":-32700`)
	p.send(`{"jsonrpc":"2.0","id":1}`) // what would be a response: its id is not the agent's to answer
	p.expect(`"id":null`, `"code":-32600`)
	p.send(`{"jsonrpc":"1.0","id":"a\u0062","method":"session/new","params":{}}`)
	p.expect(`"id":"a\u0062"`, `"code":-32600`, `"jsonrpc\" must be \"2.0\"`)
	p.send(`{"jsonrpc":"2.0","id":1.0,"method":""}`)
	p.expect(`"id":1.0`, `"code":-32600`, `empty method`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"terminal/create","params":{}}`)
	p.expect(`"id":2`, `"code":-32601`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"relative"}}`)
	p.expect(`"id":3`, `"code":-32602`, `not an absolute path`)
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}`)
	p.expect(`"id":4`, `"code":-32602`, `unknown session`)
	p.send(`{"jsonrpc":"2.0","method":"some/notification"}`)
	p.send(`{"jsonrpc":"2.0","id":"s","method":"initialize","params":{"protocolVersion":7}}`)
	p.expect(`"id":"s"`, `"protocolVersion":1`, `"agentCapabilities"`)
}

// TestAgentOversize: a request longer than the agent's line limit is
// answered under its id, wherever in the line the id is, as the conductor
// answers one; one whose id cannot be read, under null; a notification or
// a response to no call of the agent's is only logged, as JSON-RPC answers
// neither; and the agent reads on.
func TestAgentOversize(t *testing.T) {
	const limit = 1 << 10
	var log testio.Buffer
	r, w := startAgentLimited(t, limit, &log)
	p := &rawPeer{t, wire.NewLineChannel(r, w, 0)}
	long := func(head, tail string) {
		t.Helper()
		if err := p.ch.Send([]byte(head + strings.Repeat("x", limit) + tail)); err != nil {
			t.Fatal(err)
		}
	}
	long(`{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"pad":"`, `"}}`)
	p.expect(`"id":"big"`, `"code":-32600`, `exceeds`)
	long(`{"jsonrpc":"2.0","method":"session/prompt","params":{"pad":"`, `"},"id":7}`)
	p.expect(`"id":7,`, `"code":-32600`, `exceeds`)
	long(`{"jsonrpc":"2.0","method":"session/prompt","params":{"pad":"`, `"},"id":[7]}`)
	p.expect(`"id":null`, `"code":-32600`, `exceeds`)
	// Neither of these is answered: the next line the agent writes is
	// the answer to initialize. Sent from a goroutine, so that an answer
	// the agent should not write fails the test rather than block both.
	pad := strings.Repeat("x", limit)
	sent := make(chan error, 1)
	go func() {
		var err error
		for _, line := range []string{
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"pad":"` + pad + `"}}`,
			`{"jsonrpc":"2.0","id":99,"result":{"pad":"` + pad + `"}}`,
			`{"jsonrpc":"2.0","id":"s","method":"initialize","params":{"protocolVersion":1}}`,
		} {
			if err == nil {
				err = p.ch.Send([]byte(line))
			}
		}
		sent <- err
	}()
	p.expect(`"id":"s"`, `"protocolVersion":1`)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dropped a notification session/cancel", "dropped a response 99"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the agent logged %q; want %q", log.String(), want)
		}
	}
}

// TestAgentOversizeAnswer: an answer to the agent's own call that is
// longer than its line limit fails that call, which would otherwise wait
// for ever: the turn goes on as with an error answer.
func TestAgentOversizeAnswer(t *testing.T) {
	const limit = 1 << 10
	r, w := startAgentLimited(t, limit, io.Discard)
	p := &rawPeer{t, wire.NewLineChannel(r, w, 0)}
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	p.expect(`"id":0`)
	perm := p.promptToPermission()
	p.send(`{"jsonrpc":"2.0","result":{"outcome":{"outcome":"selected","optionId":"allow-once","pad":"` + strings.Repeat("x", limit) + `"}},"id":` + string(perm.ID) + `}`)
	p.expect(`"tool_call_update"`, `"failed"`)
	p.expect(`The permission request failed`, `exceeds`)
	p.expect(`"id":2`, `"end_turn"`)
}

// TestAgentOversizeBatch: a batch longer than the agent's line limit is
// answered as the conductor answers one, and as JSON-RPC answers a batch:
// by one array with an error for each request in it, under its id, that
// names the limit, and one under null for those whose ids could not be
// read; a batch with no request is only logged; an answer in one to the
// agent's own call fails that call, after the batch's requests are
// answered.
func TestAgentOversizeBatch(t *testing.T) {
	const limit = 1 << 10
	var log testio.Buffer
	r, w := startAgentLimited(t, limit, &log)
	p := &rawPeer{t, wire.NewLineChannel(r, w, 0)}
	pad := strings.Repeat("x", limit)
	const refused = `"error":{"code":-32600,"message":"batch longer than the limit of 1024 bytes was discarded"}}`

	p.send(`[{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"pad":"` + pad + `"}},` +
		`{"jsonrpc":"2.0","method":"session/cancel","params":{}},` +
		`{"jsonrpc":"2.0","id":99,"result":{}},` +
		`{"jsonrpc":"2.0","method":"x","id":"two"}]`)
	p.expectLine(`[{"jsonrpc":"2.0","id":1,` + refused + `,{"jsonrpc":"2.0","id":"two",` + refused + `]`)

	p.send(`[{"jsonrpc":"2.0","id":[3],"method":"x","params":{"pad":"` + pad + `"}},{"jsonrpc":"2.0","id":4,"method":"x"}]`)
	p.expectLine(`[{"jsonrpc":"2.0","id":4,` + refused + `,{"jsonrpc":"2.0","id":null,"error":{"code":-32600,` +
		`"message":"batch longer than the limit of 1024 bytes was discarded; this answers 1 of its requests whose ids the agent could not keep"}}]`)

	// A batch of a notification and a response to no call of the agent's
	// is not answered: the next line the agent writes is the answer to
	// initialize. Sent from a goroutine, so that an answer the agent
	// should not write fails the test rather than block both.
	sent := make(chan error, 1)
	go func() {
		var err error
		for _, line := range []string{
			`[{"jsonrpc":"2.0","method":"session/cancel","params":{"pad":"` + pad + `"}},{"jsonrpc":"2.0","id":99,"result":{}}]`,
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`,
		} {
			if err == nil {
				err = p.ch.Send([]byte(line))
			}
		}
		sent <- err
	}()
	p.expect(`"id":0`, `"protocolVersion":1`)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if want := "dropped a batch with no request in it: message exceeds 1024 bytes"; !strings.Contains(log.String(), want) {
		t.Errorf("the agent logged %q; want %q", log.String(), want)
	}

	// The answer to the agent's permission request, in a batch too long
	// to keep with a request: the request is refused, then the turn goes
	// on as with an error answer.
	perm := p.promptToPermission()
	p.send(`[{"jsonrpc":"2.0","id":5,"method":"x"},{"jsonrpc":"2.0","id":` + string(perm.ID) +
		`,"result":{"outcome":{"outcome":"selected","optionId":"allow-once","pad":"` + pad + `"}}}]`)
	p.expectLine(`[{"jsonrpc":"2.0","id":5,` + refused + `]`)
	p.expect(`"tool_call_update"`, `"failed"`)
	p.expect(`The permission request failed`, `exceeds`)
	p.expect(`"id":2`, `"end_turn"`)
}

func TestAgentCancel(t *testing.T) {
	p := newRawPeer(t)
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	p.expect(`"id":0`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	p.expect(`"sessionId":"sess_1"`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"},{"type":"resource_link","uri":"file:///w/x","name":"x"}]}}`)
	p.expect(`"agent_message_chunk"`)
	p.expect(`> go\n> [link: file:///w/x]`)
	p.expect(`"agent_message_chunk"`)
	p.expect(`"sessionUpdate":"tool_call"`)
	perm := p.expect(`"method":"session/request_permission"`)

	// While the permission request is open, a second prompt is refused and
	// the cancel is noted; the client must then answer "cancelled".
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`)
	p.expect(`"id":3`, `already running`)
	p.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}}`)
	p.send(`{"jsonrpc":"2.0","id":` + string(perm.ID) + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
	p.expect(`"tool_call_update"`, `"failed"`)
	m := p.expect(`"id":2`)
	var res struct{ StopReason string }
	if err := json.Unmarshal(m.Result, &res); err != nil || res.StopReason != "cancelled" {
		t.Errorf("prompt result = %s, want stopReason cancelled", m.Result)
	}
}

func TestAgentWithoutFileSystem(t *testing.T) {
	p := newRawPeer(t)
	p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	p.expect(`"id":0`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	p.expect(`"id":1`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
	for {
		m, line := p.recv()
		if m.Method == "fs/read_text_file" {
			t.Fatal("agent read a file from a client that did not offer fs.readTextFile")
		}
		if m.Method == "session/request_permission" {
			p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
		}
		if m.IsResponse() {
			if !strings.Contains(line, `"end_turn"`) {
				t.Errorf("turn ended with %s", line)
			}
			return
		}
	}
}

func TestClientAgentGone(t *testing.T) {
	r, w := io.Pipe()
	r2, w2 := io.Pipe()
	w2.Close() // the agent closes its output at once
	go io.Copy(io.Discard, r)
	_, err := (&Client{Prompt: "x", Cwd: "/"}).Run(context.Background(), r2, w)
	if err == nil || !strings.Contains(err.Error(), "closed the connection before answering initialize") {
		t.Errorf("Run error = %v", err)
	}
}

func TestClientTimeout(t *testing.T) {
	r, w := io.Pipe() // an agent that never answers
	go io.Copy(io.Discard, r)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	never, _ := io.Pipe()
	_, err := (&Client{Prompt: "x", Cwd: "/"}).Run(ctx, never, w)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run error = %v, want a deadline", err)
	}
}

// TestAgentBatch: a batch is answered as JSON-RPC 2.0 answers one, each
// entry handled as a single message would be: one array with the answers
// to its requests, none for its notifications and responses, and its own
// error under null for an entry that is no message; nothing for a batch
// of notifications; one error, not an array, for an empty batch. A
// request whose turn calls the client is answered when its turn ends, in
// the same array as the requests handled meanwhile, after the turn's
// updates, each on its own line.
func TestAgentBatch(t *testing.T) {
	p := newRawPeer(t)
	const notObject = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: not an object"}}`

	// A mixed batch.
	p.send(`[{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}},` +
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}},` +
		`{"jsonrpc":"2.0","id":99,"result":{}},` +
		`{"jsonrpc":"2.0","id":"b","method":"terminal/create","params":{}},` +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"relative"}},` +
		`{"jsonrpc":"1.0","id":3,"method":"x"}]`)
	p.expectLine(`[{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sess_1"}},` +
		`{"jsonrpc":"2.0","id":"b","error":{"code":-32601,"message":"method not found: terminal/create"}},` +
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"session/new: cwd \"relative\" is not an absolute path"}},` +
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}]`)

	// Entries that are not objects, each answered under null.
	p.send(`[1,{"jsonrpc":"2.0","id":4,"method":"x"},"a",[]]`)
	p.expectLine(`[` + notObject + `,{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found: x"}},` + notObject + `,` + notObject + `]`)

	// An empty batch is one invalid request, not an empty array.
	p.send(` [ ] `)
	p.expectLine(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: empty batch"}}`)

	// A batch of notifications and a response to no call is not answered:
	// the next line the agent writes is the answer to the request after
	// it. Sent from a goroutine, so that an answer the agent should not
	// write fails the test rather than block both.
	sent := make(chan error, 1)
	go func() {
		var err error
		for _, line := range []string{
			`[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_1"}},{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":98,"result":null}]`,
			`{"jsonrpc":"2.0","id":5,"method":"x"}`,
		} {
			if err == nil {
				err = p.ch.Send([]byte(line))
			}
		}
		sent <- err
	}()
	p.expectLine(`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found: x"}}`)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	// A prompt in a batch: its turn's updates and its call to the client
	// go out on their own lines; the session/new after it, handled while
	// the turn waits for the client, is answered with the prompt, once
	// the turn ends. The answer to the agent's call comes in a batch too,
	// whose request is answered on its own after the turn.
	p.send(`[{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}},` +
		`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/v","mcpServers":[]}}]`)
	p.expect(`"agent_message_chunk"`, `I received your prompt`)
	p.expect(`"agent_message_chunk"`, `> go`)
	p.expect(`"agent_message_chunk"`, `To answer`)
	p.expect(`"sessionUpdate":"tool_call"`)
	perm := p.expect(`"method":"session/request_permission"`)
	p.send(`[{"jsonrpc":"2.0","id":` + string(perm.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}},` +
		`{"jsonrpc":"2.0","id":8,"method":"x"}]`)
	p.expect(`"tool_call_update"`, `"failed"`)
	p.expect(`"agent_message_chunk"`, `does not offer fs/read_text_file`)
	p.expectLine(`[{"jsonrpc":"2.0","id":7,"result":{"sessionId":"sess_2"}},{"jsonrpc":"2.0","id":6,"result":{"stopReason":"end_turn"}}]`)
	p.expectLine(`[{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"method not found: x"}}]`)
}
