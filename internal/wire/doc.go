// Package wire is the conductor's view of JSON-RPC 2.0 on a newline-delimited
// stream: size-capped line framing and a one-level message envelope.
//
// The conductor forwards far more than it understands, so a Message keeps its
// id, params, result and error as the raw bytes that arrived. Parse scans only
// the top-level object and never decodes what it forwards (of a successor
// envelope's params it notes where the carried method and params lie, so
// that unwrapping it takes no second pass); Append writes an
// envelope back out around those same bytes, and a message that is Plain may
// be forwarded as the line it came in. Every parser here reads what
// encoding/json would read (member names with escapes decoded, the last of
// repeated names counting), and a message must say "jsonrpc":"2.0", as
// JSON-RPC 2.0 requires and every ACP and MCP SDK sends. Framing implements jrpc2's
// channel.Channel so the same transport serves relayed traffic and any
// jrpc2-based endpoint.
//
// github.com/creachadair/jrpc2 is kept for that channel interface and for
// its error codes, and for nothing else, in the conductor, the proxy
// library and the samples and fakes alike. Its Server and Client run
// handlers and deliver notifications on goroutines of their own, so a
// response can overtake the notifications sent before it; every endpoint
// here must keep the order of the wire (one reader, one FIFO writer per
// connection), and the test fakes and bench peers must write exactly the
// bytes a test or a baseline asks for.
package wire
