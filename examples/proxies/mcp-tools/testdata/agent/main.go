// Command agent is an ACP agent for tests that speaks MCP-over-ACP natively
// (it advertises mcpCapabilities.acp). Each prompt is one JSON object,
//
//	{"server": NAME, "tool": TOOL, "arguments": {...}, "connectWith": "acpId"}
//
// for which the agent connects to the acp MCP server of that name declared
// in its session, runs MCP's initialize, tools/list and tools/call through
// mcp/message, disconnects, and reports each step as an agent message
// chunk: "server: NAME", "tools: A,B", then "result: TEXT" or "error: TEXT".
// connectWith is the spelling of the server's id in mcp/connect: "acpId",
// the RFD's and the default, or "serverId", the Rust SDK's. It uses the
// standard library only.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("[%d] %s", e.Code, e.Message) }

type agent struct {
	in       chan msg
	out      *json.Encoder
	lastID   int
	sessions map[string]map[string]string // acp server ids by name, by session
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("test agent: ")
	a := &agent{in: make(chan msg), out: json.NewEncoder(os.Stdout), sessions: map[string]map[string]string{}}
	go func() {
		defer close(a.in)
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m msg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				log.Fatalf("bad input %s: %v", sc.Bytes(), err)
			}
			a.in <- m
		}
	}()
	for m := range a.in {
		a.handle(m)
	}
}

func (a *agent) send(m msg) {
	m.JSONRPC = "2.0"
	if err := a.out.Encode(m); err != nil {
		log.Fatal(err)
	}
}

func (a *agent) reply(id json.RawMessage, result any) {
	a.send(msg{ID: id, Result: mustJSON(result)})
}

// handle deals with a message that no call is waiting for.
func (a *agent) handle(m msg) {
	switch {
	case m.Method == "":
	case m.Method == "initialize":
		a.reply(m.ID, map[string]any{
			"protocolVersion":   1,
			"agentCapabilities": map[string]any{"mcpCapabilities": map[string]bool{"acp": true}},
			"agentInfo":         map[string]string{"name": "mcp-test-agent", "version": "0.1.0"},
		})
	case m.Method == "session/new":
		var p struct {
			MCPServers []struct{ Type, Name, ID string } `json:"mcpServers"`
		}
		json.Unmarshal(m.Params, &p)
		id := fmt.Sprintf("s%d", len(a.sessions)+1)
		a.sessions[id] = map[string]string{}
		for _, s := range p.MCPServers {
			if s.Type == "acp" {
				a.sessions[id][s.Name] = s.ID
			}
		}
		a.reply(m.ID, map[string]string{"sessionId": id})
	case m.Method == "session/prompt":
		a.prompt(m)
	case m.ID != nil:
		a.send(msg{ID: m.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + m.Method}})
	}
}

// call sends a request and waits for its answer, handling what else
// arrives meanwhile.
func (a *agent) call(method string, params any) (json.RawMessage, error) {
	a.lastID++
	id := json.RawMessage(fmt.Sprintf(`"agent-%d"`, a.lastID))
	a.send(msg{ID: id, Method: method, Params: mustJSON(params)})
	for m := range a.in {
		if m.Method != "" || string(m.ID) != string(id) {
			a.handle(m)
			continue
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	}
	log.Fatalf("input ended while waiting for %s", method)
	return nil, nil
}

func (a *agent) prompt(m msg) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct{ Type, Text string }
	}
	json.Unmarshal(m.Params, &p)
	say := func(format string, args ...any) {
		a.send(msg{Method: "session/update", Params: mustJSON(map[string]any{
			"sessionId": p.SessionID,
			"update": map[string]any{
				"sessionUpdate": "agent_message_chunk",
				"content":       map[string]string{"type": "text", "text": fmt.Sprintf(format, args...)},
			},
		})})
	}
	defer a.reply(m.ID, map[string]string{"stopReason": "end_turn"})

	var req struct {
		Server      string          `json:"server"`
		Tool        string          `json:"tool"`
		Arguments   json.RawMessage `json:"arguments"`
		ConnectWith string          `json:"connectWith"`
	}
	if len(p.Prompt) == 0 || json.Unmarshal([]byte(p.Prompt[len(p.Prompt)-1].Text), &req) != nil {
		say("error: the prompt is not a tool request")
		return
	}
	serverID, ok := a.sessions[p.SessionID][req.Server]
	if !ok {
		say("error: no acp MCP server %q in session %s", req.Server, p.SessionID)
		return
	}
	if req.Arguments == nil {
		req.Arguments = json.RawMessage("{}")
	}
	if req.ConnectWith == "" {
		req.ConnectWith = "acpId"
	}
	res, err := a.call("mcp/connect", map[string]string{req.ConnectWith: serverID})
	var conn struct{ ConnectionID string }
	if err == nil {
		err = json.Unmarshal(res, &conn)
	}
	if err != nil {
		say("error: mcp/connect: %v", err)
		return
	}
	defer a.call("mcp/disconnect", map[string]string{"connectionId": conn.ConnectionID})
	mcp := func(method string, params any) (json.RawMessage, error) {
		return a.call("mcp/message", map[string]any{"connectionId": conn.ConnectionID, "method": method, "params": params})
	}

	res, err = mcp("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "mcp-test-agent", "version": "0.1.0"},
	})
	if err != nil {
		say("error: initialize: %v", err)
		return
	}
	var init struct{ ServerInfo struct{ Name string } }
	json.Unmarshal(res, &init)
	say("server: %s", init.ServerInfo.Name)
	a.send(msg{Method: "mcp/message", Params: mustJSON(map[string]any{"connectionId": conn.ConnectionID, "method": "notifications/initialized"})})

	res, err = mcp("tools/list", map[string]any{})
	if err != nil {
		say("error: tools/list: %v", err)
		return
	}
	var list struct{ Tools []struct{ Name string } }
	json.Unmarshal(res, &list)
	var names []string
	for _, t := range list.Tools {
		names = append(names, t.Name)
	}
	say("tools: %s", strings.Join(names, ","))

	res, err = mcp("tools/call", map[string]any{"name": req.Tool, "arguments": req.Arguments})
	if err != nil {
		say("error: tools/call: %v", err)
		return
	}
	var call struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	json.Unmarshal(res, &call)
	var text strings.Builder
	for _, c := range call.Content {
		text.WriteString(c.Text)
	}
	if call.IsError {
		say("error: %s", text.String())
	} else {
		say("result: %s", text.String())
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	return b
}
