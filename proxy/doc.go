// Package proxy is for writing ACP proxies: components that a conductor runs
// between the client and the agent, as the proxy-chains RFD describes, to
// change what passes between them.
//
// A proxy talks only to its conductor, over one connection (its stdin and
// stdout). Messages from its predecessor, the client side, arrive plain;
// messages from its successor, the agent side, arrive wrapped in
// proxy/successor, and what the proxy sends toward the agent must be wrapped
// the same way. [Proxy.Serve] does the wrapping and unwrapping, answers
// proxy/initialize once the successor is initialized, and forwards every
// message no handler claims, with its params, _meta included, byte for byte
// and never decoded, but for an answer whose error is malformed, or that
// has a result beside its error (see [Error]). A message's top-level
// members that JSON-RPC does not define go on with it too, wherever the
// proxy rebuilds it (under an id of its own, the caller's for an answer,
// in or out of an envelope, whose params carry them beside the message's
// method and params), as the conductor carries them; and through
// [Request.Forward]. The author of a proxy writes only [Handler] functions
// for the methods the proxy cares about. A handler may change a message and
// pass it on with [Request.Forward], change the answer Forward returns,
// answer a request itself, drop a notification, or send requests and
// notifications of its own to either side through [Conn].
//
// A proxy program is a [Proxy] with its handlers, served on [Stdin] and
// [Stdout]; the package's Example is a complete one, which adds a note to
// every prompt and hides the agent's thoughts from the client, and
// [Proxy.Serve]'s example runs it against a conductor played by hand.
//
// # Ordering
//
// One goroutine reads from the conductor, and everything the proxy sends
// goes out through a single FIFO queue, or, when that is empty and out is
// [Stdout], straight out. The reader never waits for a handler or for the
// conductor to read, and the proxy sends messages in the order in which what
// caused them arrived:
//
//   - Messages no handler claims are passed on in the order they arrived,
//     and an answer passed back follows everything its sender sent before
//     it: a session/update the agent sends before it answers a
//     session/prompt reaches the client before the answer.
//   - A handler runs on a goroutine of its own but holds its message's place
//     in the queue. What it sends (its forward, its own requests and
//     notifications, its answer) goes out in that place: after what arrived
//     before its message, before what arrived after it. A session/cancel sent
//     just after a prompt goes on after the prompt, however long the
//     prompt's handler takes to rewrite it.
//   - While a handler waits for an answer from a peer (from Forward or Call,
//     for a request), it gives up its place, since that answer may depend on
//     traffic queued behind it, and what arrives meanwhile goes past it. When
//     the answer arrives, the handler takes a new place, so what it does with
//     the answer is ordered as the answer itself was: an answer to
//     session/new that a handler rewrites still reaches the client before the
//     agent's first session/update for the new session.
//   - The place is given up for good when the handler returns or calls
//     [Request.Detach]. A handler whose wait is ended by its context rather
//     than by an answer goes on without a place.
//   - What [Conn.Call] and [Conn.Notify] send under a context no handler
//     gave (context.Background(), or a deadline derived from it) is in no
//     one's place: it goes out after what is already free to go, ahead of
//     what waits behind any handler's place. A handler may wait for the
//     answer to such a call, which would never come if the call queued
//     behind the handler's own place; but it keeps its place while it
//     waits, so a handler should call under its ctx, or a context derived
//     from it, such as context.WithTimeout(ctx, d). What it sends so may
//     also leave before what it sent earlier in its place ([Conn.Call]
//     shows how to keep the order).
//
// These orders are why the proxy does not run on jrpc2's Server and Client, which
// deliver notifications and responses on goroutines of their own; of jrpc2
// it uses the error codes only.
//
// Because the queue waits at a place while its handler runs, a handler that
// blocks on anything other than a peer (a person, a slow tool) holds up all
// later traffic, both ways; it should detach first. The proxy warns of a
// handler that holds its place longer than [Proxy.HoldWarning] (10s).
// Handlers for different messages run concurrently and must guard any
// state they share. A proxy
// that keeps state for each session keeps it for one Serve call, since
// session ids are unique only on one connection, and learns when a session
// begins and ends from the requests that say so, session/new to
// session/delete, with handlers of its own; clients rarely close sessions,
// so what is left goes when Serve returns (the package's sessionState
// example). A handler that panics fails its request ([CodeInternalError]), and an MCP server whose Serve
// panics ends its connection; the panic is logged with its stack (to
// standard error unless [Proxy.Logger] says otherwise), and the proxy, with
// every other session, goes on.
//
// # Initialization
//
// The conductor starts a proxy with proxy/initialize. Its handler is the one
// for "initialize" in [Proxy.FromPredecessor], or else plain forwarding; the
// answer always declares agentCapabilities.mcpCapabilities.acp, which the RFD
// requires of every proxy. The Rust SDK's _proxy/initialize and
// _proxy/successor are understood too; a proxy initialized with
// _proxy/initialize wraps what it sends in _proxy/successor. So is the
// Thinkwell dialect of @thinkwell/conductor and sacp-conductor up to 11: an
// initialize marked _meta.proxy, answered with the same mark, and
// _proxy/successor/request and _proxy/successor/notification.
//
// # Cancellation
//
// Request ids belong to one connection, so the proxy and its conductor
// exchange $/cancel_request about the ids on theirs, always plain, as the
// ACP schema says: a proxy/successor request is cancelled by its own id,
// and cancellation is never carried to another hop in an envelope (a
// wrapped one is still accepted). A cancel names the request whose id is
// the same JSON value, however spelled (1.0 for 1), and so does a
// response's id. Cancelling a request a handler is serving cancels the
// handler's context, and a Forward or Call waiting under it passes the
// cancel on and still returns the answer, which
// is the caller's (a cancelled prompt ends with stopReason "cancelled", not
// an error). One made under it afterwards sends nothing and returns
// context.Canceled, as Notify does: what the handler still has to send
// then goes under context.WithoutCancel(ctx), which keeps its place
// ([Conn.Notify] has an example). Cancelling a request the proxy relayed cancels, in turn, the
// request it relayed it as, and the answer still comes back. A call whose
// context ends for any other reason is cancelled the same way but
// abandoned: it returns the context's error. A handler tells why its
// context ended from context.Cause(ctx), which is [ErrCancelled] to
// errors.Is for its caller's cancel and [ErrClosed] for the proxy stopping.
//
// session/cancel is a notification, not a cancel of requests, and the
// proxy passes it on like any other. ACP asks the client, once it has sent
// one, to answer the session's pending session/request_permission with
// {"outcome":{"outcome":"cancelled"}}; a proxy that answers permission
// requests itself, in the client's stead, must do the same, with a
// handler for session/cancel that ends those it has not yet decided, or
// the agent waits for them for ever (the package's permissionCancelled
// example). One that decides at once, or forwards, has none pending.
//
// # MCP over ACP
//
// A proxy can give the agent tools of its own, as MCP servers listed in
// [Proxy.MCPServers], with no process or port to manage. As the MCP-over-ACP
// RFD describes, the proxy declares each server, under a fresh id, in the
// mcpServers of every session set-up request it forwards (session/new,
// session/load, session/resume and session/fork; a handler for one of those
// sees the declarations already in r.Params), and serves the agent's
// mcp/connect, mcp/message and mcp/disconnect for them, which the conductor
// delivers as coming from the successor. Once a session is closed
// (session/close, session/delete), its ids are forgotten and the
// connections to them end as if their client had disconnected, and so
// does everything when the proxy's connection to its conductor closes.
// For a client that never closes its sessions, the proxy keeps the state
// of the 1024 it used last (set up, prompted, or whose servers the agent
// connected to or sent to), and forgets the one it used least as if it
// had closed, with a warning the first time; a session set up again
// (session/load of one it knows) replaces the ids its earlier set-up
// declared, though connections opened to them stay until it closes. A
// late mcp/disconnect for a connection that has ended so, or one sent
// again, succeeds. Nor does an agent that connects to a session's servers
// and never disconnects grow the proxy: each session holds at most 256
// connections to the proxy's servers, counting those to what its earlier
// set-ups declared, and past that the least recently used (opened, or
// sent on by the agent) ends as if its client had disconnected, with a
// warning the first time; the agent's messages on it are refused as on
// any unknown connection, and its mcp/disconnect succeeds.
// Each connection runs the server's
// Serve function with an [MCPConn], a pipe of whole MCP JSON-RPC messages, so
// any MCP implementation can serve it; package
// github.com/acp-conductor/acp-conductor/proxy/mcpsdk adapts the official Go
// SDK's. Since each session gets ids of its own, a connection knows the
// session it serves ([MCPConn.Session]), and so its working directory, and
// reaches the proxy's [Conn] ([MCPConn.Conn]) to ask the client or tell it
// of progress. The conductor bridges the servers for agents that cannot
// speak MCP-over-ACP, which the proxy cannot tell. In the Thinkwell dialect a server is
// declared as {"type":"http","url":"acp:<uuid>"}, the only form those
// conductors read, and served over _mcp/connect, _mcp/message and
// _mcp/disconnect. mcp/* messages about servers the proxy did not
// declare are forwarded like any other, or taken by handlers in
// [Proxy.FromSuccessor]. The proxy notes the connections they open until
// the sessions that declared the server through it close (or the session
// the conductor named on mcp/connect does), a session it forgets for the
// limit above counting as closed. One that no session the proxy keeps
// would end (tied to none, or named for a session it never saw set up or
// has forgotten) may end only with its mcp/disconnect: past 1024 of those
// open at once, an mcp/connect that would open another is refused with an
// error saying so, lest a client that never disconnects grow the proxy.
// Such a connection stops counting once its session is set up through the
// proxy and kept. Nor do those a kept session's end would end (to a
// server it declared, or named for it) grow with a session that stays
// open: each session holds at most 256 of them, counting those to what
// its earlier set-ups declared, and past that an mcp/connect that would
// open another is refused likewise, with a warning the first time; the
// session's connections open, and other sessions', go on. A connection
// open or opening whose session is kept, or set up again, while that
// session holds 256 counts among the 1024 instead, and may take them past
// it: while they are at or past it with any such among them, an
// mcp/connect that would be tied to a session is refused too, so that the
// connections noted stay at most 1024 and 256 for each session holding
// some.
package proxy
