// Package mcpbridge serves the agent side of MCP servers that are declared
// with ACP transport ("type": "acp"), for agents that cannot speak
// MCP-over-ACP themselves.
//
// For each such server the conductor asks the Bridge for a declaration the
// agent does understand: a stdio server whose command is "acp-conductor
// mcp-shim", or a streamable HTTP server on a loopback URL. The agent starts
// or connects to it like any MCP server, and each resulting connection
// arrives at Serve as a Conn: a stream of MCP JSON-RPC messages tagged with
// the declared server's id, which the conductor relays to the server's owner
// with mcp/connect, mcp/message and mcp/disconnect. The bridge frames and
// routes messages but never interprets MCP beyond what its transports
// require.
//
// # Stdio
//
// The shim is a relay: it connects to the bridge's Unix socket, in a private
// directory (0700), presents the secret token its declaration put in its
// environment, and copies bytes stdin→socket and socket→stdout. The bridge
// frames the socket's lines, size-capped, so an oversize message reaches the
// conductor as a *wire.OversizeError it can answer. Closing either end ends
// the other: the agent closing stdin (or killing the shim) makes Recv return
// io.EOF, and Close makes the shim exit 0.
//
// # HTTP
//
// The streamable HTTP transport listens on 127.0.0.1 only, on a port opened
// by the first HTTP declaration, at a path per server. An initialize POST
// opens a session (Mcp-Session-Id) and a Conn that lasts until DELETE,
// idleness or Close; any other POST without a session is served by a Conn of
// its own, as the sessionless 2026-07-28 revision expects. A request's
// response goes back on its own POST, as JSON or as an SSE stream;
// server-initiated messages go to the session's GET stream, else to an open
// SSE POST stream, else wait for one. What only HTTP can express is done
// here, because the owner speaks MCP as if over stdio: a POST abandoned
// before its response becomes a notifications/cancelled, requests left
// unanswered when the Conn closes get errors, and revision 2026-07-28's
// error statuses are set.
//
// # Admission
//
// Each declaration gets its own 32-byte secret, compared in constant time: a
// shim presents it in its handshake, an HTTP client as a bearer token in the
// Authorization header its declaration lists (never in the URL, which ends
// up in logs). An HTTP request must also name the listener's own address as
// its Host, and its own origin as its Origin if it has one, against DNS
// rebinding. What a peer can hold before it shows the secret is bounded: a
// 4 KiB handshake within a few seconds, a few seconds for request headers,
// and a cap on handshaking shims and on HTTP connections, beyond which
// connections wait in the kernel's queue. Refusals are logged without the
// presented secret, at most one line per interval with a count of the rest.
// A revoked secret (Revoke) is refused with the reason given, the shim's
// refusal saying it (on stderr, and to its client as the error of each
// request up to initialize) and HTTP answering 410 Gone, for the last 1024
// revoked: its holder was admitted once, and is owed why not now.
//
// # Stale directories
//
// A conductor killed outright cannot remove its socket directory, so the
// directory's name holds its pid and start time, and New removes those of
// conductors that are gone: only this user's, and only when nothing
// listens on their socket (sweep.go).
package mcpbridge
