package samples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A Client is a scripted ACP client standing in for an editor. It
// initializes, opens one session, sends one prompt and answers whatever the
// agent asks during the turn, narrating the conversation as it goes.
type Client struct {
	Prompt string // the text of the one prompt
	Cwd    string // the session's working directory; must be absolute

	// Files is the client's workspace as the agent sees it: fs/read_text_file
	// is served from here by absolute path, never from disk.
	Files map[string]string
	// Reject makes the client turn down permission requests.
	Reject bool
	// Transcript receives the narrated conversation; nil discards it.
	Transcript io.Writer
}

// A Result records what happened in the client's session.
type Result struct {
	Agent       string   // the agent's name from its agentInfo
	SessionID   string   //
	Reply       string   // the text of every agent_message_chunk, in order
	Permissions []string // the option chosen for each permission request
	Reads       []string // the path of each file the agent read
	ToolCalls   []string // the title of each tool call the agent reported
	StopReason  string   // how the prompt turn ended
}

// Run plays the script against the agent reading from out and writing to in,
// then closes out, which asks the agent to finish. The Result records as much
// as happened even when the error is not nil.
func (c *Client) Run(ctx context.Context, in io.Reader, out io.WriteCloser) (*Result, error) {
	s := &clientSession{Client: c, link: newLink(in, out, 0), res: new(Result), t: &transcript{w: c.Transcript}}
	if s.t.w == nil {
		s.t.w = io.Discard
	}
	err := s.run(ctx)
	s.t.end()
	if cerr := s.close(); err == nil && cerr != nil {
		err = fmt.Errorf("sample client: closing: %w", cerr)
	}
	return s.res, err
}

type clientSession struct {
	*Client
	*link
	res *Result
	t   *transcript
}

func (s *clientSession) run(ctx context.Context) error {
	s.t.say("→", "initialize: protocol version %d; client can read files", ProtocolVersion)
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
	}
	if err := s.request(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": true, "writeTextFile": false},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "acp-conductor-sample-client", "version": "0.1.0"},
	}, &init); err != nil {
		return err
	}
	s.res.Agent = init.AgentInfo.Name
	s.t.say("←", "initialized: %s %s, protocol version %d", init.AgentInfo.Name, init.AgentInfo.Version, init.ProtocolVersion)
	if init.ProtocolVersion != ProtocolVersion {
		return fmt.Errorf("sample client: agent speaks protocol version %d, not %d", init.ProtocolVersion, ProtocolVersion)
	}

	s.t.say("→", "session/new: cwd %s", s.Cwd)
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := s.request(ctx, "session/new", map[string]any{"cwd": s.Cwd, "mcpServers": []any{}}, &sess); err != nil {
		return err
	}
	s.res.SessionID = sess.SessionID
	s.t.say("←", "session %s", sess.SessionID)

	s.t.say("→", "session/prompt: %s", s.Prompt)
	var turn struct {
		StopReason string `json:"stopReason"`
	}
	if err := s.request(ctx, "session/prompt", map[string]any{
		"sessionId": sess.SessionID,
		"prompt":    []map[string]string{{"type": "text", "text": s.Prompt}},
	}, &turn); err != nil {
		return err
	}
	s.res.StopReason = turn.StopReason
	s.t.say("←", "stop reason: %s", turn.StopReason)
	return nil
}

// request calls method and decodes its result into v, handling the agent's
// notifications and requests in the meantime.
func (s *clientSession) request(ctx context.Context, method string, params, v any) error {
	res, rpcErr, err := s.call(ctx, method, params, s.handle)
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("sample client: the agent closed the connection before answering %s", method)
	case err != nil:
		return fmt.Errorf("sample client: %w", err)
	case rpcErr != nil:
		return fmt.Errorf("sample client: %s failed: %w", method, rpcErr)
	}
	if err := json.Unmarshal(res, v); err != nil {
		return fmt.Errorf("sample client: %s: unreadable result: %w", method, err)
	}
	return nil
}

// handle answers one message from the agent that is not the response being
// waited for.
func (s *clientSession) handle(ctx context.Context, m *wire.Message) error {
	switch {
	case m.IsResponse():
		return nil
	case m.IsNotification():
		if m.Method == "session/update" {
			s.update(m.Params)
		} else {
			s.t.say("←", "notification %s", m.Method)
		}
		return nil
	}
	switch m.Method {
	case "session/request_permission":
		return s.permission(m)
	case "fs/read_text_file":
		return s.readFile(m)
	}
	s.t.say("←", "%s (not supported; answered with an error)", m.Method)
	return s.fail(m.ID, wire.Errorf(jrpc2.MethodNotFound, "method not found: %s", m.Method))
}

// update narrates a session/update: message chunks stream onto one entry,
// everything else gets a line of its own.
func (s *clientSession) update(params json.RawMessage) {
	var p struct {
		Update struct {
			Kind    string `json:"sessionUpdate"`
			Content json.RawMessage
			ID      string `json:"toolCallId"`
			Title   string `json:"title"`
			Status  string `json:"status"`
		} `json:"update"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		s.t.say("←", "session/update (unreadable: %v)", err)
		return
	}
	u := p.Update
	switch u.Kind {
	case "agent_message_chunk":
		var c struct{ Text string }
		json.Unmarshal(u.Content, &c)
		s.res.Reply += c.Text
		s.t.stream("← agent: ", c.Text)
	case "tool_call", "tool_call_update":
		if u.Kind == "tool_call" {
			s.res.ToolCalls = append(s.res.ToolCalls, u.Title)
		}
		line := "tool call " + u.ID
		if u.Status != "" {
			line += " [" + u.Status + "]"
		}
		if u.Title != "" {
			line += ": " + u.Title
		}
		var cs []struct{ Content struct{ Text string } }
		json.Unmarshal(u.Content, &cs)
		for _, c := range cs {
			if c.Content.Text != "" {
				line += ": " + c.Content.Text
			}
		}
		s.t.say("←", "%s", line)
	default:
		s.t.say("←", "session/update %s", u.Kind)
	}
}

func (s *clientSession) permission(m *wire.Message) error {
	var p struct {
		ToolCall struct {
			ID string `json:"toolCallId"`
		} `json:"toolCall"`
		Options []struct {
			ID   string `json:"optionId"`
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || len(p.Options) == 0 {
		return s.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "session/request_permission: want options"))
	}
	var offered []string
	choice := p.Options[0].ID
	want := "allow_"
	if s.Reject {
		want = "reject_"
	}
	for i := len(p.Options) - 1; i >= 0; i-- {
		o := p.Options[i]
		offered = append([]string{fmt.Sprintf("%s (%s)", o.ID, o.Name)}, offered...)
		if strings.HasPrefix(o.Kind, want) {
			choice = o.ID
		}
	}
	s.t.say("←", "session/request_permission for tool call %s: %s", p.ToolCall.ID, strings.Join(offered, ", "))
	s.t.say("→", "permission: %s", choice)
	s.res.Permissions = append(s.res.Permissions, choice)
	return s.reply(m.ID, map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": choice}})
}

func (s *clientSession) readFile(m *wire.Message) error {
	var p struct {
		Path  string `json:"path"`
		Line  int    `json:"line"`  // 1-based; 0 means from the start
		Limit int    `json:"limit"` // 0 means no limit
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return s.fail(m.ID, wire.Errorf(jrpc2.InvalidParams, "fs/read_text_file: %v", err))
	}
	s.t.say("←", "fs/read_text_file %s", p.Path)
	content, ok := s.Files[p.Path]
	if !ok {
		s.t.say("→", "error: no such file")
		return s.fail(m.ID, wire.Errorf(codeResourceNotFound, "resource not found: %s", p.Path))
	}
	if p.Line > 1 || p.Limit > 0 {
		lines := strings.SplitAfter(content, "\n")
		lines = lines[min(max(p.Line-1, 0), len(lines)):]
		if p.Limit > 0 && p.Limit < len(lines) {
			lines = lines[:p.Limit]
		}
		content = strings.Join(lines, "")
	}
	s.res.Reads = append(s.res.Reads, p.Path)
	s.t.say("→", "file contents: %d bytes", len(content))
	return s.reply(m.ID, map[string]string{"content": content})
}

// codeResourceNotFound is ACP's error code for a missing file.
const codeResourceNotFound jrpc2.Code = -32002

// A transcript narrates a conversation one entry per line, except that
// message chunks stream onto a single entry whose continuation lines are
// indented under its first.
type transcript struct {
	w         io.Writer
	prefix    string // of the entry being streamed, "" if none
	lineStart bool   // the streamed entry's last chunk ended a line
}

func (t *transcript) say(arrow, format string, args ...any) {
	t.end()
	fmt.Fprintf(t.w, arrow+" "+format+"\n", args...)
}

func (t *transcript) stream(prefix, text string) {
	if t.prefix == "" {
		t.prefix, t.lineStart = prefix, false
		io.WriteString(t.w, prefix)
	}
	indent := strings.Repeat(" ", len([]rune(prefix)))
	for text != "" {
		line, rest, nl := strings.Cut(text, "\n")
		if t.lineStart && line != "" {
			io.WriteString(t.w, indent)
		}
		io.WriteString(t.w, line)
		if nl {
			io.WriteString(t.w, "\n")
		}
		t.lineStart, text = nl, rest
	}
}

// end finishes the entry being streamed, if any.
func (t *transcript) end() {
	if t.prefix != "" && !t.lineStart {
		io.WriteString(t.w, "\n")
	}
	t.prefix = ""
}
