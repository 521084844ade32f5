package trace

import "fmt"

// A trace must not hold the secrets that cross the conductor in its own
// messages (the MCP bridge's tokens, in the declarations it gives the
// agent): the one who holds the trace, or a bug report it went into,
// could use them. The relay passes messages on unchanged; the writer
// replaces each secret it was told of with redacted, wherever in a
// message it stands, at every detail level, in the file and the live
// stream alike.

// redacted is what a trace shows in a secret's place.
const redacted = "[redacted]"

// minSecret is the shortest secret Redact takes: a shorter word may well
// be an ordinary one.
const minSecret = 16

// secretLimit bounds the secrets a trace remembers, as pendingLimit bounds
// the requests: a secret is redacted for at least secretLimit Redact calls
// after its last, far more than there are live MCP servers, and a serve
// that runs for weeks does not keep every session's.
const secretLimit = 1 << 12

// Redact has every message recorded from now on written with secret
// replaced by "[redacted]". A secret is a word: at least 16 letters,
// digits, '-' or '_' (a hex or base64url token), and it is found where it
// stands as a whole word, between other characters (a space, a quote, a
// JSON escape, '.', '=', '/'), in a JSON string or not. A secret that is
// not a word, which it could not find, is refused with an error (which
// does not hold it); the caller must then keep the secret out of what it
// records. On a nil Recorder it does nothing.
func (r *Recorder) Redact(secret string) error {
	if r == nil {
		return nil
	}
	if len(secret) < minSecret || wordEnd([]byte(secret), 0) != len(secret) {
		return fmt.Errorf("trace: Redact: a secret of %d bytes that is not a word of at least %d letters, digits, '-' or '_' cannot be found to redact", len(secret), minSecret)
	}
	r.secretMu.Lock()
	r.newSecrets = append(r.newSecrets, secret)
	r.hasSecrets.Store(true)
	r.secretMu.Unlock()
	return nil
}

// takeSecrets hands the writer the secrets Redact was told since it last
// looked. The writer calls it after it takes a record from the queue, so
// that a secret told before the message that holds it was recorded is
// known when that message is written.
func (r *Recorder) takeSecrets(w *writer) {
	if !r.hasSecrets.Load() {
		return
	}
	r.secretMu.Lock()
	fresh := r.newSecrets
	r.newSecrets = nil
	r.hasSecrets.Store(false)
	r.secretMu.Unlock()
	for _, s := range fresh {
		w.secrets.add(s)
	}
}

// A secretSet holds secrets in two generations, as a pendingTable holds
// requests.
type secretSet struct {
	newer, older map[string]struct{}
}

func (s *secretSet) add(secret string) {
	if s.newer == nil || len(s.newer) >= secretLimit {
		s.older, s.newer = s.newer, make(map[string]struct{})
	}
	s.newer[secret] = struct{}{}
}

func (s *secretSet) has(word []byte) bool {
	_, ok := s.newer[string(word)]
	if !ok {
		_, ok = s.older[string(word)]
	}
	return ok
}

// redact returns body, JSON, with each word in a string that is a secret
// replaced by redacted: body itself when it holds none. Only strings are
// looked in, so that what is left is JSON (a number of 16 digits stays),
// and a JSON escape ends a word ("\n" before a token is not part of it).
func (s *secretSet) redact(body []byte) []byte {
	if len(s.newer) == 0 {
		return body
	}
	var out []byte
	last, inString := 0, false
	for i := 0; i < len(body); {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
			i++
		case c == '\\' && i+1 < len(body) && body[i+1] == 'u':
			i += 6 // \uXXXX, whose digits are not part of the next word
		case c == '\\':
			i += 2 // \" \\ \n ..., only ever in a string
		case !inString || !isWord(c):
			i++
		default:
			j := wordEnd(body, i)
			if j-i >= minSecret && s.has(body[i:j]) {
				out = append(append(out, body[last:i]...), redacted...)
				last = j
			}
			i = j
		}
	}
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

// wordEnd returns the end of the word that starts at b[i].
func wordEnd(b []byte, i int) int {
	for i < len(b) && isWord(b[i]) {
		i++
	}
	return i
}

// isWord says whether c may be part of a secret: base64url's alphabet,
// which holds hex's. Not '.': a token at the end of a sentence is one.
func isWord(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
