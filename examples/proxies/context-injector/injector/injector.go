// Package injector is the context-injector example proxy as a library: an
// ACP proxy that gives the agent a project's standing instructions with
// every prompt, the way agents read AGENTS.md themselves, but for any agent.
//
// It remembers the working directory of each session as the session is set
// up (session/new, session/load, session/resume, session/fork), until it is
// closed or deleted, and puts a
// text block in front of each session/prompt holding the instructions file
// nearest that directory (see [Find]). The file is read again for every
// prompt, so edits take effect at the next one. A prompt for a session whose
// directory is unknown, or with no file above it, passes through unchanged,
// as does every other message. It is built on the project's proxy library,
// which does the proxy-chain plumbing.
//
// The context-injector command is [Run] on its standard input and output;
// acp-conductor's demo runs the same code from its own binary.
package injector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// Defaults for [New] and the command line.
const (
	DefaultFile     = "AGENTS.md"
	DefaultMaxBytes = 32 << 10
)

// An Injector is the proxy's state: which instructions files to look for,
// and the working directory of every session it has seen set up.
type Injector struct {
	names    []string
	maxBytes int64
	log      *log.Logger

	mu   sync.Mutex
	cwds map[string]string // by session id
}

// New returns an Injector that looks for the files called names (relative
// paths; earlier names win within a directory; [DefaultFile] if there are
// none), injects at most maxBytes of one ([DefaultMaxBytes] if maxBytes is
// not positive), and reports files it cannot read and prompts it cannot
// edit to logger (nil discards them).
func New(names []string, maxBytes int64, logger *log.Logger) *Injector {
	if len(names) == 0 {
		names = []string{DefaultFile}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	return &Injector{names: slices.Clone(names), maxBytes: maxBytes, log: logger, cwds: make(map[string]string)}
}

// Proxy returns the proxy, ready to Serve: handlers for the requests that
// set up a session, for prompts, and for the requests that end a session.
func (in *Injector) Proxy() *proxy.Proxy {
	return &proxy.Proxy{
		Name: "context-injector", // also when a program of another name serves it, as the demo does
		FromPredecessor: map[string]proxy.Handler{
			"session/new":    in.setUp,
			"session/load":   in.setUp,
			"session/resume": in.setUp,
			"session/fork":   in.setUp,
			"session/prompt": in.prompt,
			"session/close":  in.end,
			"session/delete": in.end,
		},
	}
}

// setUp forwards a request that sets up a session and, if the agent accepts
// it, remembers the session's working directory. The session's id is the
// one in the answer (session/new, session/fork) or, failing that, the one in
// the request (session/load, session/resume).
func (in *Injector) setUp(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	result, err := r.Forward(ctx)
	if err != nil {
		return nil, err // the agent's error, passed back as it came
	}
	var req struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(r.Params, &req)
	json.Unmarshal(result, &res)
	id := res.SessionID
	if id == "" {
		id = req.SessionID
	}
	// Recorded before the answer goes back, so the client's first prompt,
	// which it can only send once it has the answer, finds the directory.
	if id != "" && filepath.IsAbs(req.Cwd) {
		in.mu.Lock()
		in.cwds[id] = req.Cwd
		in.mu.Unlock()
	}
	return result, nil
}

// end forwards a request that ends a session and, if the agent accepts it,
// forgets the session's directory: a proxy that runs all day would
// otherwise hold one for every session it has seen.
func (in *Injector) end(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	result, err := r.Forward(ctx)
	if err != nil {
		return nil, err
	}
	var req struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(r.Params, &req)
	in.mu.Lock()
	delete(in.cwds, req.SessionID)
	in.mu.Unlock()
	return result, nil
}

// prompt puts the session's instructions in front of the prompt and sends
// it on. The file is read in the prompt's place in the proxy's outgoing
// order, which holds up later traffic for as long as a small local read
// takes; that keeps a session/cancel sent right after the prompt behind it.
func (in *Injector) prompt(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(r.Params, &req)
	in.mu.Lock()
	cwd, ok := in.cwds[req.SessionID]
	in.mu.Unlock()
	if ok {
		if block, err := in.block(cwd); err != nil {
			in.log.Printf("session %s: %v", req.SessionID, err)
		} else if block != nil {
			params, err := proxy.EditMember(r.Params, "prompt", func(prompt json.RawMessage) (json.RawMessage, error) {
				return prepend(prompt, block)
			})
			if err != nil {
				// Not a prompt we understand: the agent is better placed to
				// say what is wrong with it.
				in.log.Printf("session %s: prompt left as it was: %v", req.SessionID, err)
			} else {
				r.Params = params
			}
		}
	}
	return r.Forward(ctx)
}

// block returns the text content block holding the instructions that apply
// in dir, or nil if there are none.
func (in *Injector) block(dir string) (json.RawMessage, error) {
	path, ok := Find(dir, in.names)
	if !ok {
		return nil, nil
	}
	text, err := readCapped(path, in.maxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // removed since find saw it
	}
	if err != nil {
		return nil, fmt.Errorf("reading instructions: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // instructions are full of && and <placeholders>
	err = enc.Encode(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", "Project instructions from " + path + ":\n\n" + text})
	return bytes.TrimSpace(b.Bytes()), err
}

// Find returns the instructions file nearest dir: the first of names that is
// a regular file in dir, else in dir's parent, and so on up to the root.
func Find(dir string, names []string) (string, bool) {
	for dir = filepath.Clean(dir); ; dir = filepath.Dir(dir) {
		for _, name := range names {
			path := filepath.Join(dir, name)
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				return path, true
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", false
		}
	}
}

// readCapped returns the text of the file at path, cut to at most max bytes
// (at a character boundary) with a note saying so, so that a huge file
// cannot crowd out the user's prompt.
func readCapped(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) <= max {
		return strings.ToValidUTF8(string(b), "\uFFFD"), nil
	}
	b = b[:max]
	// Drop a character the cut split in two.
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") +
		fmt.Sprintf("\n\n[The rest of this file is left out: it is longer than %d bytes.]", max), nil
}

// prepend returns the JSON array list with elem as its first element. The
// elements already there are kept byte for byte.
func prepend(list, elem json.RawMessage) (json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(list, &elems); err != nil || elems == nil {
		return nil, errors.New("prompt is not an array")
	}
	var b bytes.Buffer
	b.WriteByte('[')
	b.Write(elem)
	if len(elems) > 0 {
		b.WriteByte(',')
	}
	b.Write(bytes.TrimSpace(list)[1:]) // the rest, after the '['
	return b.Bytes(), nil
}
