// Package trace records every message that crosses the conductor as a
// trace, one JSON object per line, and shows traces as a sequence diagram.
//
// A Recorder takes messages from the relay's goroutines (Send, Reply) and
// hands them to one writer goroutine through a bounded buffer: recording
// never blocks the relay, nor wakes the writer for each message (it writes
// what has gathered 1 ms after the first of a batch). When the buffer is
// full the message is left out of the trace, counted, and the first loss
// is logged; the next message that fits is preceded by a gap event
// (TypeTrace: the type the Rust format's schema gives lines that are no
// message, component log lines, rather than one of our own), saying how
// many are missing there, and Close marks the gap a trace ends in. The
// writer turns each message into an Event in the event shape of the Rust
// conductor's .jsons traces, so that either project's viewer reads the
// other's files, and writes it to a file and to a Hub that streams it to
// live viewers. Secrets it is told of (Redact) are
// written as [redacted], whatever message holds them.
//
// The conductor is invisible in a trace: a proxy's proxy/successor envelope
// is recorded as the message it carries, from that proxy to its successor,
// and mcp/message as the MCP message it carries (protocol "mcp"), its
// answer as the MCP response (which the request binding's answer holds as
// {result} or {error}); an envelope the conductor refuses or answers
// itself is recorded so too, as a request to "conductor", or as the
// envelope when what it carries cannot be read. An answer the conductor
// takes from a component rather than pass it on (a proxy's refusal of one
// dialect's initialize, after which the conductor asks again in the next;
// an owner's refusal of mcp/connect, after which it opens the connection
// itself; the end of an initialize pending on a proxy that failed and
// was bypassed, which it sends on past it) is recorded as going to
// "conductor", a retry or resend as the conductor's request, and what
// the caller gets as the conductor's answer to the caller's request to
// "conductor": a trace never shows a component answering what its
// caller did not get. Nor one answering what it never answered: a
// failure the conductor gives in a component's stead (the component
// exited holding the request, say, or was bypassed) is a response from
// "conductor" (ReplyFor). Each request is recorded under the id its
// receiver saw, and its response under the same id, so that from, to
// and id pair them; a response to "conductor" pairs with the request its
// sender was asked under that id, whoever sent it, and one from
// "conductor" with the request its receiver sent under that id (or, to
// "conductor" too, anyone), whoever was asked.
//
// View renders a trace as one self-contained HTML page; Serve serves the
// same page live, over loopback only, behind a random path token.
package trace
