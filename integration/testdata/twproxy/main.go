// Command twproxy [NAME] is an ACP proxy of the dialect @thinkwell/conductor
// and sacp-conductor up to 11 speak, used by the integration tests. It is
// written from their code (the @thinkwell/conductor and @thinkwell/protocol
// packages, sacp's schema types), not from the conductor's, with only
// encoding/json, so the two do not share mistakes.
//
// The dialect: it refuses proxy/initialize and _proxy/initialize as unknown
// methods; it takes initialize only when marked _meta.proxy: true, and
// answers with the same mark; everything for its successor goes out in
// _proxy/successor/request or _proxy/successor/notification, and comes back
// so. It forwards everything else unchanged, under ids of its own.
//
// It serves one MCP server, NAME-tools, the dialect's way: declared in each
// session/new it forwards as {"type":"http","url":"acp:<uuid>","headers":[]},
// reached over _mcp/connect (thinkwell: {connectionId, url}, answered with
// that connectionId; with ACP_IT_TW_FLAVOR=sacp: {acp_url}, answered
// {connection_id}), _mcp/message {connectionId, method, params} answered
// with the MCP result, and _mcp/disconnect, a notification. Its tool greet
// {name} sends a progress notification for the call, then answers with
// JSON naming the proxy, the greeting, the ACP session (from the
// _mcp/connect's _meta["acp-conductor/sessionId"]) and the MCP client (from
// initialize, or from the request's stateless _meta).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
)

// logMCP, set by ACP_IT_TW_LOG_MCP=1, logs the method of each MCP message
// that reaches the server, for a test to wait on.
var logMCP = os.Getenv("ACP_IT_TW_LOG_MCP") == "1"

const (
	request      = "_proxy/successor/request"
	notification = "_proxy/successor/notification"
	serverURL    = "acp:2b7f4e0c-9a1d-4c3e-8f56-71d0c4a9e2b5"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type envelope struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// A connection is one _mcp/connect's.
type connection struct {
	session string // the ACP session, from the connect's _meta
	client  string // the MCP client's name, from initialize
}

type proxy struct {
	name   string
	sacp   bool
	w      *bufio.Writer
	nextID int64
	// pending maps our id to the id we owe an answer to and whether the
	// request was an initialize (whose answer we mark as a proxy's).
	pending map[string]pendingCall
	conns   map[string]*connection
	lastCID int
}

type pendingCall struct {
	answerTo json.RawMessage
	init     bool
}

func (p *proxy) send(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		log.Printf("encode: %v", err)
		return
	}
	p.w.Write(append(b, '\n'))
	if err := p.w.Flush(); err != nil {
		log.Printf("write: %v", err)
	}
}

func (p *proxy) answer(id json.RawMessage, result any) {
	b, _ := json.Marshal(result)
	p.send(message{ID: id, Result: b})
}

func (p *proxy) fail(id json.RawMessage, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	p.send(message{ID: id, Error: b})
}

// call sends a request under an id of ours, to be answered to answerTo.
func (p *proxy) call(method string, params, answerTo json.RawMessage, init bool) {
	p.nextID++
	id := json.RawMessage(strconv.Quote(fmt.Sprintf("tw-%d", p.nextID)))
	p.pending[string(id)] = pendingCall{answerTo, init}
	p.send(message{ID: id, Method: method, Params: params})
}

// toSuccessor sends a message on to the successor in its envelope.
func (p *proxy) toSuccessor(m *message) {
	inner, _ := json.Marshal(envelope{Method: m.Method, Params: m.Params})
	if m.ID == nil {
		p.send(message{Method: notification, Params: inner})
		return
	}
	p.call(request, inner, m.ID, m.Method == "initialize")
}

func (p *proxy) handle(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		log.Printf("dropping unparseable line: %v", err)
		return
	}
	switch {
	case m.Method == "": // an answer to one of ours
		pc, ok := p.pending[string(m.ID)]
		if !ok {
			log.Printf("response to unknown id %s", m.ID)
			return
		}
		delete(p.pending, string(m.ID))
		if pc.init && m.Error == nil {
			m.Result = marked(m.Result)
		}
		if m.Error == nil && m.Result == nil {
			m.Result = json.RawMessage("null")
		}
		p.send(message{ID: pc.answerTo, Result: m.Result, Error: m.Error})
	case m.Method == "proxy/initialize" || m.Method == "_proxy/initialize":
		p.fail(m.ID, -32601, "Method not found: "+m.Method)
	case m.Method == "initialize":
		var params map[string]json.RawMessage
		json.Unmarshal(m.Params, &params)
		var meta map[string]json.RawMessage
		json.Unmarshal(params["_meta"], &meta)
		if string(meta["proxy"]) != "true" {
			p.fail(m.ID, -32602, "this component is a proxy: initialize it with _meta.proxy")
			return
		}
		delete(meta, "proxy")
		if len(meta) == 0 {
			delete(params, "_meta")
		} else {
			params["_meta"], _ = json.Marshal(meta)
		}
		m.Params, _ = json.Marshal(params)
		p.toSuccessor(&m)
	case m.Method == "session/new":
		var params map[string]json.RawMessage
		json.Unmarshal(m.Params, &params)
		var servers []json.RawMessage
		json.Unmarshal(params["mcpServers"], &servers)
		decl, _ := json.Marshal(map[string]any{"type": "http", "name": p.name + "-tools", "url": serverURL, "headers": []any{}})
		params["mcpServers"], _ = json.Marshal(append(servers, decl))
		m.Params, _ = json.Marshal(params)
		p.toSuccessor(&m)
	case m.Method == request || m.Method == notification: // from the successor
		var inner envelope
		if err := json.Unmarshal(m.Params, &inner); err != nil || inner.Method == "" {
			if m.ID != nil {
				p.fail(m.ID, -32602, "bad "+m.Method)
			}
			return
		}
		if (m.Method == request) != (m.ID != nil) {
			log.Printf("%s with the wrong kind of message", m.Method)
		}
		switch inner.Method {
		case "_mcp/connect", "_mcp/message", "_mcp/disconnect":
			p.mcp(m.ID, inner.Method, inner.Params)
		default:
			if m.ID == nil {
				p.send(message{Method: inner.Method, Params: inner.Params})
			} else {
				p.call(inner.Method, inner.Params, m.ID, false)
			}
		}
	case m.Method == "proxy/successor" || m.Method == "_proxy/successor":
		log.Printf("an envelope of another dialect: %s", m.Method)
		if m.ID != nil {
			p.fail(m.ID, -32601, "Method not found: "+m.Method)
		}
	default: // from the predecessor
		p.toSuccessor(&m)
	}
}

// marked returns an initialize result with _meta.proxy: true.
func marked(result json.RawMessage) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil || r == nil {
		return result
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(r["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta["proxy"] = json.RawMessage("true")
	r["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(r)
	return out
}

// mcp serves the dialect's MCP-over-ACP methods.
func (p *proxy) mcp(id json.RawMessage, method string, raw json.RawMessage) {
	var params struct {
		ConnectionID  string          `json:"connectionId"`
		ConnectionID2 string          `json:"connection_id"`
		URL           string          `json:"url"`
		ACPURL        string          `json:"acp_url"`
		Method        string          `json:"method"`
		Params        json.RawMessage `json:"params"`
		Meta          struct {
			Session string `json:"acp-conductor/sessionId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &params); err != nil {
		if id != nil {
			p.fail(id, -32602, "bad "+method)
		}
		return
	}
	switch method {
	case "_mcp/connect":
		url, cid := params.URL, params.ConnectionID
		if p.sacp {
			p.lastCID++
			url, cid = params.ACPURL, fmt.Sprintf("%s-conn-%d", p.name, p.lastCID)
		}
		if url != serverURL || cid == "" {
			p.fail(id, -32602, fmt.Sprintf("No MCP server registered for URL: %s", url))
			return
		}
		p.conns[cid] = &connection{session: params.Meta.Session}
		if p.sacp {
			p.answer(id, map[string]string{"connection_id": cid})
		} else {
			p.answer(id, map[string]any{"connectionId": cid, "serverInfo": map[string]string{"name": p.name + "-tools", "version": "0.1.0"}, "capabilities": map[string]any{"tools": map[string]any{}}})
		}
	case "_mcp/disconnect":
		if id != nil {
			log.Printf("_mcp/disconnect as a request")
			p.fail(id, -32601, "Method not found: _mcp/disconnect")
			return
		}
		cid := params.ConnectionID
		if p.sacp {
			cid = params.ConnectionID2
		}
		if p.conns[cid] == nil {
			log.Printf("_mcp/disconnect for unknown connection %q", cid)
		}
		delete(p.conns, cid)
	case "_mcp/message":
		conn := p.conns[params.ConnectionID]
		if logMCP {
			log.Printf("MCP %s on %s", params.Method, params.ConnectionID)
		}
		if conn == nil {
			if id != nil {
				p.fail(id, -32600, "Unknown connection: "+params.ConnectionID)
			}
			return
		}
		if id == nil {
			return // notifications/initialized and the like
		}
		p.serve(id, params.ConnectionID, conn, params.Method, params.Params)
	}
}

// serve answers one MCP request on a connection.
func (p *proxy) serve(id json.RawMessage, cid string, conn *connection, method string, raw json.RawMessage) {
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      struct{ Name string }
		Name            string `json:"name"`
		Arguments       struct {
			Name string `json:"name"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage       `json:"progressToken"`
			ClientInfo    struct{ Name string } `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	json.Unmarshal(raw, &params)
	switch method {
	case "initialize":
		conn.client = params.ClientInfo.Name
		p.answer(id, map[string]any{"protocolVersion": params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]string{"name": p.name + "-tools", "version": "0.1.0"}})
	case "tools/list":
		p.answer(id, map[string]any{"tools": []any{map[string]any{"name": "greet", "description": "Greets someone",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]string{"type": "string"}}}}}})
	case "tools/call":
		if params.Name != "greet" {
			p.fail(id, -32602, "Unknown tool: "+params.Name)
			return
		}
		if params.Meta.ProgressToken != nil {
			progress, _ := json.Marshal(map[string]any{"connectionId": cid, "method": "notifications/progress",
				"params": map[string]any{"progressToken": params.Meta.ProgressToken, "progress": 1, "message": p.name + " working"}})
			inner, _ := json.Marshal(envelope{Method: "_mcp/message", Params: progress})
			p.send(message{Method: notification, Params: inner})
		}
		client := conn.client
		if client == "" {
			client = params.Meta.ClientInfo.Name
		}
		text, _ := json.Marshal(map[string]string{"owner": p.name, "greeting": "hello " + params.Arguments.Name, "session": conn.session, "client": client})
		p.answer(id, map[string]any{"content": []any{map[string]string{"type": "text", "text": string(text)}}})
	default:
		p.fail(id, -32601, "Method not found: "+method)
	}
}

func main() {
	name := "tw"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	log.SetFlags(0)
	log.SetPrefix(fmt.Sprintf("[%s %d] ", name, os.Getpid()))
	p := &proxy{name: name, sacp: os.Getenv("ACP_IT_TW_FLAVOR") == "sacp", w: bufio.NewWriterSize(os.Stdout, 64<<10),
		pending: map[string]pendingCall{}, conns: map[string]*connection{}}
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 1 {
			p.handle(line)
		}
		if err != nil {
			if err != io.EOF {
				log.Printf("read: %v", err)
			}
			return
		}
	}
}
