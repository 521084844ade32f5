// Package transport carries ACP over the network, as the Streamable HTTP and
// WebSocket transport RFD describes: one /acp endpoint that upgrades to a
// WebSocket (one text frame per JSON-RPC message) or speaks Streamable HTTP
// (POST for the client's messages, long-lived SSE streams opened with GET for
// the server's, DELETE to end the connection).
//
// # Design
//
// Both profiles are reduced to one abstraction, a Conn: a full-duplex
// sequence of JSON-RPC messages, each one compact line of JSON. Server hands
// each new ACP connection to a function that serves it (acp-conductor runs a
// chain per connection); Dial opens the client side, WebSocket first and
// Streamable HTTP when an http(s) server refuses the upgrade. Lines adapts a
// Conn to the newline-delimited reader and writer of the stdio transport, so
// that code written for stdio runs on a remote connection unchanged.
//
// Streamable HTTP needs the server to route each outgoing message to a
// stream: a response goes where its request came from (the session named by
// Acp-Session-Id or the request's params.sessionId, or the connection), a
// request or notification to its params.sessionId's stream, anything else to
// the connection-scoped stream. That is the TypeScript SDK 2.4's reading of
// the RFD, which the package follows where the two differ (a GET for a
// session the server has not seen yet opens its stream rather than 404, since
// a client reopens a session's stream before session/load; a batch is
// answered 400 with a JSON-RPC error, and one the chain writes is sent as
// its messages, since the SDK's client skips an array on a stream).
// A WebSocket has one stream, so a batch there is passed on as stdio
// passes one: acp-conductor relays each entry as a message of its own
// and answers them in one array, as JSON-RPC 2.0 does.
// Streams buffer what is sent while no
// client is attached, up to a bound on bytes and one on the sessions
// buffering (the SDK's maxBufferedSessionStreams): a request that would make
// one more session buffer is refused with 400, output that would is a
// client not reading, and closes the connection. The streams one
// connection holds open at once are bounded too (MaxStreams; 409 beyond),
// since any session's GET opens one. A session's stream ends
// once it has sent the answer to the session's session/close (or
// session/delete) and the answers still owed on it, and the client lets go
// of it once that answer has come on it, whichever server it talks to, so
// that the sessions a connection closes leave no stream behind.
//
// The RFD leaves Acp-Protocol-Version to future work and says clients SHOULD
// send it; the SDK does nothing with it. Both sides here treat it as MCP's
// Streamable HTTP treats MCP-Protocol-Version: the client sends the version
// its initialize negotiated on every later request, and the server, which
// names that version on its initialize answer, refuses a request naming
// another with 400 and accepts one naming none. The client keeps the
// server's cookies for the connection's life, as the RFD requires.
//
// A peer whose network vanished (no FIN, no RST) is noticed by a heartbeat
// rather than when TCP gives up a quarter of an hour later. Each end of a
// WebSocket pings the other every PingInterval and closes the connection
// when no pong comes within it; its Read then fails with ErrHeartbeat. A
// Streamable HTTP connection has IdleTimeout instead, since it outlives its
// TCP connections, and Listen bounds how long a TCP connection's sent data
// may go unacknowledged, which ends the SSE streams of a client whose
// network vanished.
//
// Guard checks what every request must carry before any of this runs: the
// bearer token, compared in constant time, and a Host and Origin that a DNS
// rebinding page cannot forge.
package transport
