// Package conductor runs an ACP proxy chain: it presents itself as one agent
// to its client and relays every message between the client, the proxies and
// the final agent, following the proxy-chains RFD.
package conductor
