package proxy

import (
	"encoding/json"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// EditMember returns a copy of the JSON object obj with the value of its
// member name replaced by what edit returns. edit receives the old value, or
// nil if there is none, in which case the new member is added at the end. If
// edit returns an empty value, obj is returned unchanged. Every other byte of
// obj is kept, so a handler can change one field of a message's params, or of
// an answer, without decoding or disturbing the rest (such as _meta). A null
// or empty obj counts as {}. Names match as encoding/json reads them:
// escapes decoded, and each byte that is not valid UTF-8 read as U+FFFD.
func EditMember(obj json.RawMessage, name string, edit func(old json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	return wire.EditMember(obj, name, edit)
}
