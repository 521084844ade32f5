package wire

import "github.com/go-json-experiment/json/jsontext"

// validOptions make jsontext accept exactly what encoding/json.Valid
// accepts: JSON-RPC peers may repeat a member name or send invalid UTF-8 in
// strings, and such messages are forwarded as they are, not refused.
var validOptions = []jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
}

// Valid reports whether data is one valid JSON value, as encoding/json.Valid
// does. Every message the relay forwards is validated once, so this pass is
// on the hot path; jsontext's validator is the faster one (make bench, and
// BenchmarkRelay in ./conductor, show the difference).
func Valid(data []byte) bool {
	return jsontext.Value(data).IsValid(validOptions...)
}
