// Package conductor runs an ACP proxy chain: it presents itself to its client
// as one ordinary agent, starts the chain's proxies and final agent as
// subprocesses, and relays every message between them as the proxy-chains RFD
// prescribes.
//
// # Design
//
// Every connection (the client on stdin/stdout, each component on its pipes)
// is a peer with exactly one reader goroutine and one FIFO writer. A reader
// parses each line only at the top level (internal/wire), asks route what it
// is and where it goes (route.go holds every routing rule, as a pure function
// of positions in the chain and the dialect each peer speaks; the relay only
// carries out the decision), and appends the re-addressed line to the
// destination's outbox.
// Because one goroutine handles a peer's messages in the order they arrived
// and outboxes are FIFO, a session/update an agent sends before its prompt
// response reaches the editor first, across any number of proxies.
//
// Each hop gets its own request id: a request is recorded in the table of the
// peer it is sent to, under a fresh integer id, and the response that comes
// back under that id is returned to the original caller under the caller's
// id, whatever its type. Params, results, errors and _meta are carried as the
// bytes that arrived, and so are a message's top-level members JSON-RPC
// does not define, which a rebuilt message gets back after its own (inside
// an envelope's params when it is wrapped: wire.Message.AppendExtra and
// AppendCarriedExtra); only proxy/successor envelopes are unwrapped or built,
// and only initialize is renamed (proxy/initialize for a proxy, initialize
// for the agent). A plain notification that none of that touches goes on as
// the very line that came (wire.Message.Plain says when that is safe).
//
// # Vocabulary
//
// Three verbs say how a message moves, each for one thing:
//
//   - send: queue one encoded line on one peer's outbox (peer.send). It is
//     the only way anything reaches a peer; the outbox puts, takes and
//     writes below it.
//   - relay: carry a request or notification on to the peer route chose,
//     re-addressed and dressed for it as its delivery says (chain.relay).
//     relayCall is relay for a request whose answer someone awaits: it
//     records the call on both sides first.
//   - answer: send a response back to whoever asked, into their batch if
//     the request came in one (answer, call.answer). relayAnswer answers
//     with what a peer answered, under the asker's id; answerError answers
//     with the conductor's own error (and logs a notification it drops).
//
// # Dialects
//
// Proxies spell the proxy protocol in one of three dialects, which
// wire.Dialects lists as data (the initialize method, the request and
// notification envelopes, the MCP-over-ACP methods): the RFD's
// (proxy/initialize, proxy/successor), the Rust SDK's (_proxy/initialize,
// _proxy/successor) and that of @thinkwell/conductor and sacp-conductor
// (initialize marked with _meta.proxy, _proxy/successor/request and
// _proxy/successor/notification, _mcp/*). Each proxy is detected on its
// own, in that order: proxy/initialize first; on method-not-found (-32601),
// _proxy/initialize; on method-not-found again, initialize marked
// _meta.proxy: true, whose answer must carry the same mark (else the
// component is no proxy, and the editor is told so). Only the proxy's own
// refusal counts: once it has passed an initialize on to its successor, a
// method-not-found it returns is the successor's, and goes back as it is.
// Each refused try costs one round trip to that proxy, once, before its
// initialize; an RFD proxy costs nothing. From then on the conductor speaks
// to the proxy in its dialect, accepts every dialect's envelopes from
// anyone, and spells MCP-over-ACP methods as each destination does. In
// proxy mode the parent's initialize tells its dialect the same way.
//
// A line goes out from the goroutine that routed it, with one non-blocking
// write, when the destination is idle; the writer goroutine takes only what
// a full pipe would not. A reader that got several lines from one read
// holds writes back until it has routed them all (holdback.go), so a burst
// costs one write per destination. A line that goes on as it came is
// written from the read buffer it was read into, and copied only where it
// would still be queued when that buffer is refilled (lend.go). Large params
// and results are written from the line they arrived in, and once large
// lines have gone out their memory is collected at once (memory.go).
//
// MCP-over-ACP is routed by the ids it carries rather than by position
// (mcp.go; route.go names the rule): straight from the agent to the
// component that declared the server, and back. Both bindings are spoken:
// the connect binding (mcp/connect, then mcp/message {connectionId}; the
// RFD's and the Rust SDK's) and the request binding (mcp/message {serverId,
// requestId} answered {result} or {error}; the TypeScript SDK's, MCP
// 2026-07-28). An owner's binding is learned from its answer to the first
// mcp/connect the conductor relays or sends for it: refused as an unknown
// method (-32601, however written: -32601.0 too, as wire.Parse reads a
// code), it binds per request, otherwise per connection; a nested
// conductor takes both (metaRequestBinding) and gets each as it came. Where
// caller and owner differ, the conductor translates (mcpxlate.go), playing
// a legacy MCP client's initialize handshake for a stateless owner. The
// client's own mcp/message goes to the first proxy, as its other messages
// do, unless it is on a connection, a call to a declared server, or a
// notification about a server the client itself declared, which goes back
// to the caller the way the call came, so as not to fall behind its answer.
// A caller may be a proxy or the client too: the conductor remembers which
// position made each request-binding call in flight (mcpcalls.go), and an
// owner's notification about it goes back there, not to the agent.
//
// A Thinkwell-dialect component declares its servers as
// {"type":"http","url":"acp:<uuid>","headers":[]}; the conductor records
// it as their owner, under the URL as server id, and gives the agent an acp
// declaration ({"type":"acp","serverId":URL}, plus "id" as for any acp
// server; url and headers dropped, the rest kept), or the bridge's. Such an
// owner binds per connection and is spoken to in _mcp/*, whatever dialect
// it declared from: _mcp/connect {"connectionId", "url", "acp_url",
// "_meta"} carries both parents' spellings (@thinkwell/conductor sends
// connectionId, which the conductor proposes, and url; sacp-conductor sends
// acp_url) and its answer may give connectionId, sacp's connection_id, or
// neither (the proposed one is kept); _mcp/message is the connect binding's
// {connectionId, method, params}; _mcp/disconnect is a notification,
// {"connectionId", "connection_id"}, which the conductor answers itself if
// the agent sent a request. A Thinkwell parent in proxy mode may connect by
// url or acp_url. sacp's earliest _mcp/request and _mcp/notification are
// not accepted.
//
// What is queued for a peer is bounded (flow.go): while an outbox is past
// its bound, readers stop reading after the line or burst in hand, so a
// source that keeps writing blocks on its own pipe, as with no conductor in
// between; nothing is dropped or reordered. The rule that keeps this free
// of deadlocks a pipe would not have: a reader never waits for its own
// peer's outbox, nor where the waits would close a cycle of more than two
// peers; it goes on reading instead, past the bound, until that cycle is
// gone. Two peers that each write without reading while the other does
// block each other, as they would on a pipe of their own; not so a proxy,
// whose one pipe carries both directions: its reader goes on past such a
// pair, for a bounded while, so that it can read again. A bridged MCP
// connection is bounded alike, but waits only for, and is waited for only
// by, the proxy that owns its server.
//
// The relay does not use jrpc2's Server or Client: they run handlers and
// deliver notifications on separate goroutines, so a relayed prompt result
// could overtake its updates and a session/cancel could run before the
// prompt ahead of it. The transport is jrpc2's channel.Channel interface,
// implemented with size-capped line framing, and error codes are jrpc2's.
//
// # Lifecycle
//
// Run starts every component in its own process group and owns all
// goroutines through one WaitGroup. Shutdown has one path, whatever ends the
// run (the client closing its input, ctx, a component failing): input is
// closed along the chain so that what is in flight drains, then each
// component gets a grace period, then SIGTERM and SIGKILL go to its process
// group so no grandchild survives. Requests that can no longer be answered
// get a JSON-RPC error naming the component, with its exit status and the
// last lines of its stderr; its message, which is what an editor shows,
// carries the one of those lines that most likely says why (cause.go).
// When the drain is over, the client's requests still unanswered, and
// those made of it (an agent's permission request), get the conductor's
// own error before any input closes, saying why it stops and which
// component each waited on (the client, for those made of it): otherwise
// a proxy whose input closed would answer with an error that knows less,
// and an agent would hear nothing. Once a request of the client's has
// been failed so, the client is sealed: the chain's later notifications
// for it (an agent streaming on) are dropped, as route says, and counted;
// its outbox refuses them too, sealed under its own lock before the
// errors are queued, for one routed just before the seal, or addressed
// by the MCP router, not to land after them.
//
// A restarted proxy is sent its replayed initializes first, one at a
// time, and what queued for it meanwhile only once it has answered them
// all (outbox.hold): a proxy may take anything else that comes first for
// the answer it waits for, and an initialize of the client's that came
// in among the replays would take a replay's recorded answer. What it
// holds counts toward its bound, but the readers after it, whose answers
// alone let it drain, do not wait for it while the replays are under way.
package conductor
