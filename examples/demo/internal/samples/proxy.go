package samples

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// ProxyNote is the text the sample proxy puts at the start of every prompt.
const ProxyNote = "[sample-proxy] Project note: this prompt passed through the acp-conductor sample proxy."

// Proxy serves one conductor on in and out as a sample ACP proxy, built on
// package proxy: it puts ProxyNote, as a text block, at the start of every
// session/prompt, offers the agent the MCP tool ProxyMCPTool over
// MCP-over-ACP (see proxy_mcp.go), and passes everything else through
// untouched. It returns nil when in ends and ctx.Err() if ctx ends first.
func Proxy(ctx context.Context, in io.Reader, out io.WriteCloser) error {
	counts := &promptCounts{n: make(map[string]int)}
	p := &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				var req struct {
					SessionID string `json:"sessionId"`
				}
				json.Unmarshal(r.Params, &req)
				counts.add(req.SessionID)
				return addProxyNote(ctx, r)
			},
		},
		MCPServers: []*proxy.MCPServer{counts.mcpServer()},
	}
	return p.Serve(ctx, in, out)
}

// addProxyNote sends a prompt on with the note in front; the agent's answer
// is the answer. A prompt it cannot make sense of goes on unchanged, for the
// agent to refuse.
func addProxyNote(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	params, err := proxy.EditMember(r.Params, "prompt", func(prompt json.RawMessage) (json.RawMessage, error) {
		return prependElem(prompt, proxyNoteBlock)
	})
	if err == nil {
		r.Params = params
	}
	return r.Forward(ctx)
}

var proxyNoteBlock, _ = json.Marshal(map[string]string{"type": "text", "text": ProxyNote})

var errPromptNotArray = errors.New("prompt is not an array")

// prependElem puts elem first in the JSON array list. The elements already there
// stay byte for byte as they were.
func prependElem(list, elem json.RawMessage) (json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(list, &elems); err != nil || elems == nil {
		return nil, errPromptNotArray
	}
	rest := bytes.TrimSpace(list)[1:] // after the '['
	out := append(append([]byte{'['}, elem...), ',')
	if len(elems) == 0 {
		out = out[:len(out)-1]
	}
	return append(out, rest...), nil
}
