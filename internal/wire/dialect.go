package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
)

// A Dialect is one spelling of the proxy protocol between a conductor and a
// proxy: how the conductor initializes the proxy, the envelopes in which
// they exchange what concerns the proxy's successor, and the MCP-over-ACP
// methods. The conductor and the proxy library speak each peer's dialect
// from this table, so a new dialect is a new entry, not new branches.
//
// Every known dialect shapes an envelope's params the same way, as the
// carried message's {"method", "params"} (Unwrap, AppendWrapped); the
// carrier's own members, such as _meta, stay outside. The carried message's
// members JSON-RPC does not define go beside its method and params
// (Message.AppendCarriedExtra).
type Dialect struct {
	Name string // for logs: "rfd", "rust", "thinkwell"

	// Initialize is the method a conductor initializes a proxy with. With
	// InitializeMeta, it is the agent's own initialize marked as a proxy's
	// by _meta.proxy (and sacp's _meta.symposium.proxy), and the proxy's
	// answer carries the same mark.
	Initialize     string
	InitializeMeta bool

	// The envelope methods for a request and for a notification.
	SuccessorRequest, SuccessorNotification string

	// The MCP-over-ACP methods.
	MCPConnect, MCPMessage, MCPDisconnect string
	// MCPByURL: a proxy declares its MCP servers as
	// {"type":"http","url":"acp:<uuid>"}, and the conductor connects to one
	// by that url (sacp: acp_url), proposing a connectionId; the answer and
	// the disconnect name the connection as connectionId or (sacp)
	// connection_id. Otherwise servers are {"type":"acp"} with an id, and
	// the proxy picks the connectionId.
	MCPByURL bool
}

// The dialects in use. A conductor tries them in this order (Dialects): each
// try that a proxy refuses with method-not-found costs one round trip before
// its initialize, once per proxy.
var (
	// RFD is the proxy-chains RFD's, which the TypeScript SDK follows.
	RFD = &Dialect{
		Name:                  "rfd",
		Initialize:            MethodProxyInitialize,
		SuccessorRequest:      MethodSuccessor,
		SuccessorNotification: MethodSuccessor,
		MCPConnect:            "mcp/connect",
		MCPMessage:            "mcp/message",
		MCPDisconnect:         "mcp/disconnect",
	}
	// Rust is the Rust SDK's: the RFD's methods, each with an underscore.
	Rust = &Dialect{
		Name:                  "rust",
		Initialize:            MethodProxyInitRust,
		SuccessorRequest:      MethodSuccessorRust,
		SuccessorNotification: MethodSuccessorRust,
		MCPConnect:            "mcp/connect",
		MCPMessage:            "mcp/message",
		MCPDisconnect:         "mcp/disconnect",
	}
	// Thinkwell is that of @thinkwell/conductor and sacp-conductor up to
	// 11: initialize marked with _meta.proxy, one envelope for requests
	// and another for notifications, and _mcp/* methods whose servers are
	// declared as {"type":"http","url":"acp:<uuid>"}.
	Thinkwell = &Dialect{
		Name:                  "thinkwell",
		Initialize:            MethodInitialize,
		InitializeMeta:        true,
		SuccessorRequest:      "_proxy/successor/request",
		SuccessorNotification: "_proxy/successor/notification",
		MCPConnect:            "_mcp/connect",
		MCPMessage:            "_mcp/message",
		MCPDisconnect:         "_mcp/disconnect",
		MCPByURL:              true,
	}

	// Dialects lists them in the order a conductor tries them.
	Dialects = []*Dialect{RFD, Rust, Thinkwell}
)

// Successor returns the envelope method for a request (id != nil) or a
// notification.
func (d *Dialect) Successor(id json.RawMessage) string {
	if id != nil {
		return d.SuccessorRequest
	}
	return d.SuccessorNotification
}

// Next returns the dialect to try after a proxy refused d's initialize, or
// nil if there is none.
func (d *Dialect) Next() *Dialect {
	for i, x := range Dialects[:len(Dialects)-1] {
		if x == d {
			return Dialects[i+1]
		}
	}
	return nil
}

// A methodClass is what the dialects make of one method name.
type methodClass struct {
	envelope   *Dialect // the dialect whose successor envelope it is
	proxyInit  *Dialect // the dialect whose own proxy initialize it is
	mcp        string   // the MCP-over-ACP method it is, in the RFD's spelling
	initialize bool     // it is initialize, in any spelling
}

// methodClasses holds every method name to which some dialect gives a
// meaning, built from Dialects, and leads the first bytes of those names.
// The relay asks about each message's method several times; most
// messages name none of these (session/update, fs/read_text_file, ...),
// and their first byte says so without a lookup.
var methodClasses, leads = func() (map[string]methodClass, *[256]bool) {
	classes := map[string]methodClass{MethodInitialize: {initialize: true}}
	set := func(name string, f func(*methodClass)) {
		c := classes[name]
		f(&c)
		classes[name] = c
	}
	for _, d := range Dialects {
		set(d.SuccessorRequest, func(c *methodClass) { c.envelope = cmp.Or(c.envelope, d) })
		set(d.SuccessorNotification, func(c *methodClass) { c.envelope = cmp.Or(c.envelope, d) })
		if !d.InitializeMeta {
			set(d.Initialize, func(c *methodClass) { c.proxyInit, c.initialize = cmp.Or(c.proxyInit, d), true })
		}
		set(d.MCPConnect, func(c *methodClass) { c.mcp = RFD.MCPConnect })
		set(d.MCPMessage, func(c *methodClass) { c.mcp = RFD.MCPMessage })
		set(d.MCPDisconnect, func(c *methodClass) { c.mcp = RFD.MCPDisconnect })
	}
	var leads [256]bool
	for name := range classes {
		leads[name[0]] = true
	}
	return classes, &leads
}()

// classify returns what the dialects make of method: nothing, for most.
func classify(method string) methodClass {
	if method == "" || !leads[method[0]] {
		return methodClass{}
	}
	return methodClasses[method]
}

// EnvelopeDialect returns the dialect whose envelope method is method, or
// nil if method is not an envelope.
func EnvelopeDialect(method string) *Dialect { return classify(method).envelope }

// IsSuccessor reports whether method names a successor envelope in any
// dialect.
func IsSuccessor(method string) bool { return classify(method).envelope != nil }

// ProxyInitDialect returns the dialect whose proxy initialize method is
// method, for the dialects that have one of their own, or nil.
func ProxyInitDialect(method string) *Dialect { return classify(method).proxyInit }

// IsInitialize reports whether method is any spelling of initialize.
func IsInitialize(method string) bool { return classify(method).initialize }

// MCPMethod returns the MCP-over-ACP method that method spells in any
// dialect, in the RFD's spelling ("mcp/connect", ...), and whether it is one.
func MCPMethod(method string) (string, bool) {
	mcp := classify(method).mcp
	return mcp, mcp != ""
}

// SpellMCP returns method, an MCP-over-ACP method in the RFD's spelling, as
// d spells it; any other method is returned as it is.
func (d *Dialect) SpellMCP(method string) string {
	switch method {
	case RFD.MCPConnect:
		return d.MCPConnect
	case RFD.MCPMessage:
		return d.MCPMessage
	case RFD.MCPDisconnect:
		return d.MCPDisconnect
	}
	return method
}

// InitializeParams returns the params of an initialize for a proxy of
// dialect d: params as they are, or marked as a proxy's where d says so.
func (d *Dialect) InitializeParams(params json.RawMessage) (json.RawMessage, error) {
	if !d.InitializeMeta {
		return params, nil
	}
	p, err := SetPath(params, []string{"_meta", "proxy"}, json.RawMessage("true"))
	if err != nil {
		return nil, err
	}
	return SetPath(p, []string{"_meta", "symposium", "proxy"}, json.RawMessage("true"))
}

// MarkedProxy reports whether an initialize request's params or result
// carry the proxy mark of the Thinkwell dialect, in either spelling.
func MarkedProxy(obj json.RawMessage) bool {
	meta := Member(obj, "_meta")
	if meta == nil {
		return false
	}
	return bytes.Equal(Member(meta, "proxy"), []byte("true")) ||
		bytes.Equal(Member(Member(meta, "symposium"), "proxy"), []byte("true"))
}
