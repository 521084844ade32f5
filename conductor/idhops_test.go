package conductor

import (
	"testing"
)

// TestIDsAcrossHops: whatever id a caller spells, it gets its answer
// under those very bytes, across a proxy, each way, while each hop sees
// an integer of the conductor's: a float, an exponent, -0, an integer
// no double holds, null, an escaped string, a string that reads as a
// number. Params null go on as null on a plain hop; in an envelope they
// are no params, as wire.Unwrap reads them (a Rust proxy writes none so).
// A batch that mixes requests and notifications reaches the proxy entry
// by entry, and its answers come back as one array.
func TestIDsAcrossHops(t *testing.T) {
	ed, p, ag := proxyChain(t, `{"protocolVersion":1}`)
	ids := []string{`1.0`, `1e2`, `-0`, `1.5`, `9007199254740993`, `null`, `"\u0037"`, `"7"`}
	for _, id := range ids {
		ed.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"x/a","params":null}`)
		m := p.recvMsg()
		if want := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"method":"x/a","params":null}`; string(m.Raw) != want || m.ID[0] < '0' || m.ID[0] > '9' {
			t.Errorf("id %s: the proxy got %s, want %s under an id of the conductor's", id, m.Raw, want)
		}
		p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":null}`)
		if got, want := string(ed.recvLine()), `{"jsonrpc":"2.0","id":`+id+`,"result":null}`; got != want {
			t.Errorf("id %s: the editor got %s, want %s", id, got, want)
		}
	}
	for _, id := range ids {
		ag.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"x/b","params":null}`)
		m := p.recvMsg()
		if want := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"method":"proxy/successor","params":{"method":"x/b","params":null}}`; string(m.Raw) != want {
			t.Errorf("id %s: the proxy got %s, want %s", id, m.Raw, want)
		}
		p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`)
		if got, want := string(ag.recvLine()), `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`; got != want {
			t.Errorf("id %s: the agent got %s, want %s", id, got, want)
		}
		p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"proxy/successor","params":{"method":"x/c","params":null}}`)
		m = ag.recvMsg()
		if want := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"method":"x/c"}`; string(m.Raw) != want {
			t.Errorf("id %s: the agent got %s, want %s", id, m.Raw, want)
		}
		ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":[]}`)
		if got, want := string(p.recvLine()), `{"jsonrpc":"2.0","id":`+id+`,"result":[]}`; got != want {
			t.Errorf("id %s: the proxy got %s, want %s", id, got, want)
		}
	}

	ed.send(`[{"jsonrpc":"2.0","id":"d","method":"x/d","params":{}},{"jsonrpc":"2.0","method":"x/e","params":null},{"jsonrpc":"2.0","id":2.0,"method":"x/f"}]`)
	d, e, f := p.recvMsg(), p.recvLine(), p.recvMsg()
	if d.Method != "x/d" || string(e) != `{"jsonrpc":"2.0","method":"x/e","params":null}` || f.Method != "x/f" {
		t.Fatalf("the proxy got %s, %s, %s; want the batch's entries in order", d.Raw, e, f.Raw)
	}
	p.reply(f, `"f"`)
	p.reply(d, `"d"`)
	if got, want := string(ed.recvLine()), `[{"jsonrpc":"2.0","id":2.0,"result":"f"},{"jsonrpc":"2.0","id":"d","result":"d"}]`; got != want {
		t.Errorf("the editor got %s, want %s", got, want)
	}
}
