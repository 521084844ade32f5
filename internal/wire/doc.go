// Package wire is the conductor's view of JSON-RPC 2.0 on a newline-delimited
// stream: size-capped line framing and a one-level message envelope.
//
// The conductor forwards far more than it understands, so a Message keeps its
// id, params, result and error as the raw bytes that arrived. Parse scans only
// the top-level object and never decodes what it forwards; Append writes an
// envelope back out around those same bytes, and a message that is Plain may
// be forwarded as the line it came in. Framing implements jrpc2's
// channel.Channel so the same transport serves relayed traffic and any
// jrpc2-based endpoint.
package wire
