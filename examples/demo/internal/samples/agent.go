// Package samples holds a small scripted ACP agent, client and proxy, so that
// a whole chain can run with nothing installed: the demo (examples/demo)
// starts its own binary as the sample proxy and agent under a conductor and
// drives them with the sample client. The proxy is built on package proxy
// alone, as any proxy would be. The agent and the client are JSON-RPC
// endpoints of a kind the library does not provide; they use the
// conductor's own framing and messages (internal/wire: size-capped lines
// that survive an oversize one, raw-preserving messages, the parse-error
// codes) rather than a second copy of them, each on a single goroutine that
// both handles what arrives and sends, so their messages leave in exactly
// the order the protocol requires; one extra goroutine per connection only
// reads.
package samples

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// ProtocolVersion is the ACP version the samples speak.
const ProtocolVersion = 1

// Agent serves one client on in and out as a scripted ACP agent. It returns
// nil when in ends and ctx.Err() if ctx ends first.
//
// Each prompt turn is the same script: the agent streams back the text it
// received, so any rewriting by proxies is visible; asks permission to read
// README.md in the session's directory and says what the answer was; reads
// it through the client if the client advertised fs.readTextFile; reports
// what it found; calls the sample
// proxy's MCP tool over MCP-over-ACP if the session declared it (see
// agent_mcp.go); and ends the turn.
// session/cancel ends a running turn with stopReason "cancelled".
func Agent(ctx context.Context, in io.Reader, out io.WriteCloser) error {
	return agentLimited(ctx, in, out, 0, os.Stderr)
}

// agentLimited is Agent reading lines up to limit bytes (0: the default),
// so that a test can exceed it without writing 64 MiB, and logging to
// logw (the conductor logs a component's stderr).
func agentLimited(ctx context.Context, in io.Reader, out io.WriteCloser, limit int, logw io.Writer) error {
	a := &agent{link: newLink(in, out, limit), sessions: make(map[string]*session), logw: logw}
	a.onBad = a.bad
	defer a.close()
	for {
		m, err := a.recv(ctx)
		if err == nil {
			err = a.dispatch(ctx, m)
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			return fmt.Errorf("sample agent: %w", err)
		}
	}
}

// AgentName is the name the sample agent gives in its agentInfo.
const AgentName = "acp-conductor-sample-agent"

type agent struct {
	*link
	logw     io.Writer
	canRead  bool // the client advertised fs.readTextFile
	sessions map[string]*session
	turn     *session // the session whose prompt turn is running, if any
}

type session struct {
	id        string
	cwd       string
	mcp       []acpServer // the MCP servers declared with ACP transport
	cancelled bool        // session/cancel arrived during the current turn
}

// dispatch handles one message that arrived while no call was waiting for
// it. Only a failure to write is returned; a bad request gets an error reply.
func (a *agent) dispatch(ctx context.Context, m *wire.Message) error {
	switch {
	case m.IsResponse():
		return nil // a late answer to a call we gave up on
	case m.IsNotification():
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Params, &p) == nil && a.sessions[p.SessionID] != nil {
				a.sessions[p.SessionID].cancelled = true
			}
		}
		return nil // other notifications need nothing from this agent
	}
	switch m.Method {
	case "initialize":
		return a.initialize(m)
	case "session/new":
		return a.newSession(m)
	case "session/prompt":
		return a.prompt(ctx, m)
	}
	return a.fail(m.ID, wire.Errorf(jrpc2.MethodNotFound, "method not found: %s", m.Method))
}

// bad deals with a line the agent could not use. A request, or what may
// be one, is answered with the error, under its id or null. A line too
// long to keep that is a notification or a response is only logged, as
// the conductor does: JSON-RPC answers neither, and an answer to the
// agent's own call has failed that call already (link.recv). A batch too
// long to keep is answered by oversizeBatch.
func (a *agent) bad(b *badMessage) error {
	big, ok := errors.AsType[*wire.OversizeError](b.err)
	if ok && big.IsBatch {
		return a.oversizeBatch(big)
	}
	if ok && (big.Method == "" || big.ID == nil && !big.IDUnread) {
		kind := "notification " + big.Method
		switch {
		case big.IsResponse:
			kind = "response " + string(big.ID)
		case big.Method == "":
			kind = "line that is no JSON-RPC message"
		}
		_, err := fmt.Fprintf(a.logw, "sample agent: dropped a %s: %v\n", kind, big)
		return err
	}
	return a.fail(b.id(), b.rpcError())
}

// oversizeBatch answers a batch too long to keep as the conductor answers
// one (chain.oversizeBatch), with the same wire.RefuseBatch, and as
// JSON-RPC 2.0 answers a batch: with one array holding an error for each
// request in it, under the request's id, naming the limit; the requests
// whose ids could not be kept (see wire.OversizeError.BatchUnkept) get one
// error more, under null. A batch with no request in it is only logged:
// JSON-RPC answers none, and an answer in it to the agent's own call has
// failed that call already (link.recv).
func (a *agent) oversizeBatch(big *wire.OversizeError) error {
	e := wire.Errorf(jrpc2.InvalidRequest, "batch longer than the limit of %d bytes was discarded", big.Limit)
	var unkept *wire.Error // answers, under null, the requests whose ids were not kept
	if n := big.BatchUnkept; n > 0 {
		unkept = wire.Errorf(jrpc2.InvalidRequest, "batch longer than the limit of %d bytes was discarded; this answers %d of its requests whose ids the agent could not keep", big.Limit, n)
	}
	out := wire.RefuseBatch(big.Batch, e, unkept)
	if out == nil {
		_, err := fmt.Fprintf(a.logw, "sample agent: dropped a batch with no request in it: %v\n", big)
		return err
	}
	return a.ch.Send(out)
}

func (a *agent) initialize(m *wire.Message) error {
	var p struct {
		ProtocolVersion    int `json:"protocolVersion"`
		ClientCapabilities struct {
			FS struct {
				ReadTextFile bool `json:"readTextFile"`
			} `json:"fs"`
		} `json:"clientCapabilities"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return a.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "initialize: %v", err))
	}
	a.canRead = p.ClientCapabilities.FS.ReadTextFile
	// Whatever the client asked for, answer with the one version spoken here;
	// the client decides whether it can live with it.
	type info struct {
		Name    string `json:"name"`
		Title   string `json:"title"`
		Version string `json:"version"`
	}
	return a.reply(m.ID, struct {
		ProtocolVersion   int            `json:"protocolVersion"`
		AgentCapabilities map[string]any `json:"agentCapabilities"`
		AgentInfo         info           `json:"agentInfo"`
		AuthMethods       []any          `json:"authMethods"`
	}{
		ProtocolVersion: ProtocolVersion,
		AgentCapabilities: map[string]any{
			"loadSession":        false,
			"promptCapabilities": map[string]bool{"image": false, "audio": false, "embeddedContext": false},
			"mcpCapabilities":    map[string]bool{"http": false, "sse": false, "acp": true},
		},
		AgentInfo:   info{AgentName, "acp-conductor sample agent", "0.1.0"},
		AuthMethods: []any{},
	})
}

func (a *agent) newSession(m *wire.Message) error {
	var p struct {
		Cwd string `json:"cwd"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return a.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "session/new: %v", err))
	}
	if !filepath.IsAbs(p.Cwd) {
		return a.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "session/new: cwd %q is not an absolute path", p.Cwd))
	}
	s := &session{id: "sess_" + strconv.Itoa(len(a.sessions)+1), cwd: p.Cwd, mcp: acpServers(m.Params)}
	a.sessions[s.id] = s
	return a.reply(m.ID, map[string]string{"sessionId": s.id})
}

// A contentBlock is the part of an ACP ContentBlock this agent looks at.
type contentBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	URI      string `json:"uri,omitempty"`
	Resource *struct {
		URI string `json:"uri"`
	} `json:"resource,omitempty"`
}

func (a *agent) prompt(ctx context.Context, m *wire.Message) error {
	var p struct {
		SessionID string         `json:"sessionId"`
		Prompt    []contentBlock `json:"prompt"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return a.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "session/prompt: %v", err))
	}
	s := a.sessions[p.SessionID]
	switch {
	case s == nil:
		return a.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "session/prompt: unknown session %q", p.SessionID))
	case a.turn != nil:
		// Calls made during a turn hand other requests back to dispatch;
		// one turn at a time keeps the script simple.
		return a.fail(m.ID, wire.Errorf(jrpc2.InternalError, "session/prompt: a prompt turn is already running"))
	}
	a.turn, s.cancelled = s, false
	defer func() { a.turn = nil }()

	stop, err := a.script(ctx, s, p.Prompt)
	if err == nil && stop == "end_turn" {
		stop, err = a.useProxyTool(ctx, s)
	}
	if err != nil {
		return err
	}
	return a.reply(m.ID, map[string]string{"stopReason": stop})
}

// script plays one prompt turn and returns its stop reason.
func (a *agent) script(ctx context.Context, s *session, prompt []contentBlock) (string, error) {
	say := func(text string) error {
		return a.update(s, map[string]any{
			"sessionUpdate": "agent_message_chunk",
			"content":       map[string]string{"type": "text", "text": text},
		})
	}
	if err := say("I received your prompt:\n"); err != nil {
		return "", err
	}
	if err := say(quote(promptText(prompt))); err != nil {
		return "", err
	}
	path := filepath.Join(s.cwd, "README.md")
	if err := say("To answer, I need to read " + path + ".\n"); err != nil {
		return "", err
	}
	const toolID = "call_1"
	toolCall := map[string]any{
		"toolCallId": toolID,
		"title":      "Read " + path,
		"kind":       "read",
		"status":     "pending",
		"locations":  []map[string]string{{"path": path}},
	}
	if err := a.update(s, with(toolCall, "sessionUpdate", "tool_call")); err != nil {
		return "", err
	}
	status := func(st string, content ...string) error {
		u := map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": toolID, "status": st}
		for _, c := range content {
			u["content"] = []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": c}}}
		}
		return a.update(s, u)
	}

	res, rpcErr, err := a.call(ctx, "session/request_permission", map[string]any{
		"sessionId": s.id,
		"toolCall":  toolCall,
		"options": []map[string]string{
			{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
			{"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
		},
	}, a.dispatch)
	if err != nil {
		return "", err
	}
	var answer struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if rpcErr == nil {
		if err := json.Unmarshal(res, &answer); err != nil {
			rpcErr = wire.Errorf(jrpc2.InvalidParams, "bad permission response: %v", err)
		}
	}
	switch {
	case s.cancelled || answer.Outcome.Outcome == "cancelled":
		return "cancelled", status("failed")
	case rpcErr != nil:
		if err := status("failed"); err != nil {
			return "", err
		}
		return "end_turn", say("The permission request failed (" + rpcErr.Message + "), so I did not read the file.\n")
	case answer.Outcome.OptionID != "allow-once":
		if err := status("failed"); err != nil {
			return "", err
		}
		return "end_turn", say("You declined, so I did not read the file.\n")
	case !a.canRead:
		if err := status("failed"); err != nil {
			return "", err
		}
		return "end_turn", say("Permission granted, but your client does not offer fs/read_text_file, so I cannot read it.\n")
	}

	// Whoever answered, the client or a proxy on its behalf, say what the
	// answer was.
	if err := say("Permission granted (" + answer.Outcome.OptionID + "), so I am reading it through your client.\n"); err != nil {
		return "", err
	}
	if err := status("in_progress"); err != nil {
		return "", err
	}
	res, rpcErr, err = a.call(ctx, "fs/read_text_file", map[string]any{"sessionId": s.id, "path": path}, a.dispatch)
	if err != nil {
		return "", err
	}
	var file struct {
		Content string `json:"content"`
	}
	if rpcErr == nil {
		if err := json.Unmarshal(res, &file); err != nil {
			rpcErr = wire.Errorf(jrpc2.InvalidParams, "bad fs/read_text_file response: %v", err)
		}
	}
	if s.cancelled {
		return "cancelled", status("failed")
	}
	if rpcErr != nil {
		if err := status("failed", rpcErr.Message); err != nil {
			return "", err
		}
		return "end_turn", say("I could not read it: " + rpcErr.Message + "\n")
	}
	summary := describe(file.Content)
	if err := status("completed", summary); err != nil {
		return "", err
	}
	return "end_turn", say("Done: README.md " + summary + "\n")
}

func (a *agent) update(s *session, u map[string]any) error {
	return a.notify("session/update", map[string]any{"sessionId": s.id, "update": u})
}

func with(m map[string]any, k string, v any) map[string]any {
	c := maps.Clone(m)
	c[k] = v
	return c
}

// promptText renders a prompt as text, one line per block.
func promptText(blocks []contentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Type == "text":
			parts = append(parts, b.Text)
		case b.Type == "resource_link":
			parts = append(parts, "[link: "+b.URI+"]")
		case b.Type == "resource" && b.Resource != nil:
			parts = append(parts, "[resource: "+b.Resource.URI+"]")
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// quote marks every line of s with "> ", as mail quotes, so the echo stands
// apart from the agent's own words.
func quote(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(strings.TrimRight("> "+line, " ") + "\n")
	}
	return b.String()
}

// describe summarises file contents in a phrase.
func describe(content string) string {
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	if content == "" {
		return "is empty."
	}
	noun := "lines"
	if len(lines) == 1 {
		noun = "line"
	}
	return fmt.Sprintf("has %d %s; it begins %q.", len(lines), noun, lines[0])
}

// A link is one end of a JSON-RPC connection for a scripted peer. A goroutine
// reads and parses incoming lines and hands them over in order; everything
// else, sending included, happens on the caller's goroutine, so messages
// leave in program order: an agent's updates always precede the response
// that ends its turn. A batch's entries are handed over one by one, each as
// a single message would be, and the answers to its requests go back
// together (see batch).
type link struct {
	ch      *wire.LineChannel
	in      chan received // closed when the stream ends
	err     error         // why it ended; read only after in is closed
	done    chan struct{}
	nextID  int64
	calling json.RawMessage // the id of the call awaiting its answer, if any

	// batch is the batch that the message being handled came in, if any:
	// reply and fail answer into it. recv sets it for each message it
	// hands over, and call puts back the caller's when its wait ends, so
	// that a message handled meanwhile (a request in another batch, or
	// none) does not take the answer of the one the caller is handling.
	batch *batch

	// onBad, if set, answers an unparsable message so reading can go on.
	onBad func(*badMessage) error
}

type received struct {
	msg   *wire.Message
	err   error  // *badMessage for a line that could not be parsed
	batch *batch // the batch msg came in, if it did
}

// A batch gathers the answers to the requests of a JSON-RPC batch, which go
// back as one array once the last of them is answered (JSON-RPC 2.0,
// section 6), as the conductor's batch does: in the order they are given,
// which JSON-RPC leaves free, so that a request whose turn calls the
// client is answered after those of its batch handled while it waits.
// Nothing goes back for a batch with no request.
type batch struct {
	waiting int    // entries still owed an answer
	out     []byte // "[" and the answers so far
}

// errEmptyBatch refuses "[]", which JSON-RPC answers with one invalid
// request error under null, not with an empty array.
var errEmptyBatch = fmt.Errorf("%w: empty batch", wire.ErrNotJSONRPC)

// splitBatch returns the entries of line, a batch, to be handed over one
// by one. Those owed an answer (requests, and entries that are no valid
// message, each answered with its own error) are counted before any is
// handed over, so that no early answer can complete the batch.
func splitBatch(line []byte) []received {
	b := new(batch)
	var rs []received
	wire.EachElement(line, func(v []byte) {
		r := received{batch: b}
		m, err := wire.Parse(v)
		switch {
		case err != nil:
			r.err = &badMessage{err}
			b.waiting++
		case m.IsRequest():
			b.waiting++
		}
		r.msg = m
		rs = append(rs, r)
	})
	if len(rs) == 0 {
		return []received{{err: &badMessage{errEmptyBatch}}}
	}
	return rs
}

// A badMessage is an incoming line that is not a usable JSON-RPC message.
// The connection goes on; the peer deserves an error reply.
type badMessage struct{ err error }

func (b *badMessage) Error() string { return "received an invalid message: " + b.err.Error() }
func (b *badMessage) Unwrap() error { return b.err }

func (b *badMessage) rpcError() *wire.Error { return wire.ParseError(b.err) }

// id is the id to answer it under: that of what would be a request, as it
// came, if it can be read, as JSON-RPC 2.0 answers an invalid request (of
// a request too long to keep too, as the conductor answers one); else nil,
// for null.
func (b *badMessage) id() json.RawMessage { return wire.ParseErrorID(b.err) }

// newLink reads lines of up to limit bytes (0: the default) from r.
func newLink(r io.Reader, w io.WriteCloser, limit int) *link {
	l := &link{ch: wire.NewLineChannel(r, w, limit), in: make(chan received), done: make(chan struct{})}
	go l.read()
	return l
}

func (l *link) read() {
	defer close(l.in)
	for {
		var r received
		line, err := l.ch.Recv()
		var big *wire.OversizeError
		switch {
		case errors.As(err, &big):
			r.err = &badMessage{err}
		case err != nil:
			l.err = err // published to recv by closing l.in
			return
		case wire.IsBatch(line):
			for _, r := range splitBatch(line) {
				if !l.hand(r) {
					return
				}
			}
			continue
		default:
			if r.msg, err = wire.Parse(line); err != nil {
				r.err = &badMessage{err}
			}
		}
		if !l.hand(r) {
			return
		}
	}
}

// hand hands r over to recv, and reports false if the link was closed
// first.
func (l *link) hand(r received) bool {
	select {
	case l.in <- r:
		return true
	case <-l.done:
		return false
	}
}

// recv returns the next message. An unparsable one is passed to onBad if set,
// and otherwise returned as an error wrapping a *badMessage. When the stream
// ends recv returns its error, io.EOF if the peer closed it.
func (l *link) recv(ctx context.Context) (*wire.Message, error) {
	for {
		select {
		case r, ok := <-l.in:
			if !ok {
				return nil, l.err
			}
			l.batch = r.batch
			// An answer to the call awaited that was too long to keep
			// fails the call, which would otherwise wait for ever; the
			// requests of a batch it came in are answered first.
			var bad *badMessage
			if big, ok := errors.AsType[*wire.OversizeError](r.err); ok && l.calling != nil && answers(big, l.calling) {
				if big.IsBatch && errors.As(r.err, &bad) && l.onBad != nil {
					if err := l.onBad(bad); err != nil {
						return nil, err
					}
				}
				e := wire.Errorf(jrpc2.InternalError, "the response was discarded: %v", big)
				return &wire.Message{ID: l.calling, Error: e.Encode()}, nil
			}
			if errors.As(r.err, &bad) && l.onBad != nil {
				if err := l.onBad(bad); err != nil {
					return nil, err
				}
				continue
			}
			return r.msg, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answers reports whether a line too long to keep was, or held in its
// batch, a response under id.
func answers(big *wire.OversizeError, id json.RawMessage) bool {
	if !big.IsBatch {
		return big.IsResponse && wire.SameID(big.ID, id)
	}
	return slices.ContainsFunc(big.Batch, func(en wire.OversizeEntry) bool { return en.IsResponse && wire.SameID(en.ID, id) })
}

// close stops reading and closes the writing side, which tells the peer we
// are done.
func (l *link) close() error {
	close(l.done)
	return l.ch.Close()
}

func (l *link) send(m *wire.Message) error { return l.ch.Send(m.Bytes()) }

func (l *link) notify(method string, params any) error {
	p, err := wire.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return l.send(&wire.Message{Method: method, Params: p})
}

func (l *link) reply(id json.RawMessage, result any) error {
	r, err := wire.Marshal(result)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	return l.answer(&wire.Message{ID: id, Result: r})
}

func (l *link) fail(id json.RawMessage, e *wire.Error) error {
	return l.answer(wire.ErrorResponse(id, e))
}

// answer sends m, the answer to the message being handled, or adds it to
// the batch that message came in, which it sends once m is the last owed.
func (l *link) answer(m *wire.Message) error {
	b := l.batch
	if b == nil {
		return l.send(m)
	}
	l.batch = nil // one answer each: anything more goes on its own
	sep := byte(',')
	if len(b.out) == 0 {
		sep = '['
	}
	b.out = m.Append(append(b.out, sep))
	if b.waiting--; b.waiting > 0 {
		return nil
	}
	return l.ch.Send(append(b.out, ']'))
}

// call sends a request and waits for its response, passing everything else
// that arrives meanwhile to handle, in order. An error response comes back as
// rpcErr; err reports a broken connection, ctx ending, or handle failing.
func (l *link) call(ctx context.Context, method string, params any, handle func(context.Context, *wire.Message) error) (result json.RawMessage, rpcErr *wire.Error, err error) {
	p, err := wire.Marshal(params)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	id := wire.IntID(l.nextID)
	l.nextID++
	if err := l.send(&wire.Message{ID: id, Method: method, Params: p}); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	prev, batch := l.calling, l.batch
	l.calling = id
	defer func() { l.calling, l.batch = prev, batch }()
	for {
		m, err := l.recv(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("waiting for the %s response: %w", method, err)
		}
		if !m.IsResponse() || !bytes.Equal(m.ID, id) {
			if err := handle(ctx, m); err != nil {
				return nil, nil, err
			}
			continue
		}
		if m.Error != nil {
			e := new(wire.Error)
			if err := json.Unmarshal(m.Error, e); err != nil {
				e = wire.Errorf(jrpc2.InternalError, "unreadable error object %s", m.Error)
			}
			return nil, e, nil
		}
		return m.Result, nil, nil
	}
}
