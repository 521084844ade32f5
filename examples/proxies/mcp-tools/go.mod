module github.com/acp-conductor/acp-conductor/examples/proxies/mcp-tools

go 1.26.8

require (
	github.com/acp-conductor/acp-conductor v0.0.0-20261123095829-b0b757e8fee4
	github.com/acp-conductor/acp-conductor/proxy/mcpsdk v0.0.0-20261123095829-b0b757e8fee4
	github.com/modelcontextprotocol/go-sdk v1.8.0
)

require (
	github.com/creachadair/jrpc2 v1.3.6 // indirect
	github.com/creachadair/mds v0.31.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

// The requires above name this repository's modules by the pseudo-version
// of a commit on main, so that "go install" of this example resolves them;
// within the repository the replace below builds against the checkout (see
// proxy/mcpsdk/go.mod for how to move them).
replace (
	github.com/acp-conductor/acp-conductor => ../../..
	github.com/acp-conductor/acp-conductor/proxy/mcpsdk => ../../../proxy/mcpsdk
)
