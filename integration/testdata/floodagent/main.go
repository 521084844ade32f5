// Command floodagent is an ACP agent for the memory tests: it writes as
// fast as its stdout takes, so that whoever stops reading it shows whether
// the conductor between buffers without bound.
//
//   - session/prompt with _meta {"flood":{"count":N,"size":S}} answers with
//     N session/update notifications, each carrying _meta {"seq":i} before a
//     text of S bytes, then end_turn; then it says "floodagent: prompt done"
//     on stderr.
//   - any other request but initialize and session/new is answered with its
//     own params as the result (an echo); after ACP_IT_ECHOES of them it says
//     "floodagent: echoes done" on stderr.
//
// Writes are buffered and flushed when no input is waiting, so that the
// agent, like a busy real one, never waits for its reader between messages.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
)

type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("floodagent: ")
	echoes, _ := strconv.Atoi(os.Getenv("ACP_IT_ECHOES"))
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	answered := 0
	for {
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				log.Fatalf("write: %v", err)
			}
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err != io.EOF {
				log.Printf("read: %v", err)
			}
			w.Flush()
			return
		}
		var m message
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue // notifications and anything else: nothing to say
		}
		switch m.Method {
		case "initialize":
			reply(w, m.ID, `{"protocolVersion":1,"agentCapabilities":{}}`)
		case "session/new":
			reply(w, m.ID, `{"sessionId":"flood"}`)
		case "session/prompt":
			var p struct {
				Meta struct {
					Flood struct{ Count, Size int }
				} `json:"_meta"`
			}
			json.Unmarshal(m.Params, &p)
			flood(w, p.Meta.Flood.Count, p.Meta.Flood.Size)
			reply(w, m.ID, `{"stopReason":"end_turn"}`)
			if err := w.Flush(); err != nil {
				log.Fatalf("write: %v", err)
			}
			log.Print("prompt done")
		default:
			reply(w, m.ID, string(m.Params))
			if answered++; answered == echoes {
				w.Flush()
				log.Print("echoes done")
			}
		}
	}
}

func reply(w *bufio.Writer, id json.RawMessage, result string) {
	if result == "" {
		result = "null"
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
}

// flood writes n session/updates with a text of size bytes each.
func flood(w *bufio.Writer, n, size int) {
	text := strings.Repeat("x", size)
	for i := range n {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{"seq":%d},"sessionId":"flood","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}`+"\n", i, text)
	}
}
