package conductor

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// exactServerIDs reads the acp servers that session set-up params
// declare as an SDK reads them: member names exactly as the schema spells
// them (JSON decoders in JavaScript and Rust match no other case), each
// entry on its own, an entry of the wrong shape skipped; idless says
// whether an acp entry names no server at all.
func exactServerIDs(params json.RawMessage) (ids []string, idless bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return nil, false
	}
	var servers []json.RawMessage
	if json.Unmarshal(p["mcpServers"], &servers) != nil {
		return nil, false
	}
	str := func(e map[string]json.RawMessage, k string) string {
		var s string
		json.Unmarshal(e[k], &s)
		return s
	}
	for _, raw := range servers {
		var e map[string]json.RawMessage
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		switch typ, url := str(e, "type"), str(e, "url"); {
		case typ == "http" && len(url) >= len(acpURLScheme) && url[:len(acpURLScheme)] == acpURLScheme:
			ids = append(ids, url)
		case typ != "acp":
		case str(e, "id") != "":
			ids = append(ids, str(e, "id"))
		case str(e, "serverId") != "":
			ids = append(ids, str(e, "serverId"))
		default:
			idless = true
		}
	}
	return ids, idless
}

// FuzzDeclare: the servers the conductor routes for are the servers the
// declarations name as the agent reads them, and the declarations it
// passes on name those servers and no others; params with an acp entry
// that names none are refused, and nothing is routed for them.
func FuzzDeclare(f *testing.F) {
	f.Add([]byte(`{"cwd":"/","mcpServers":[{"type":"acp","name":"t","serverId":"s1"},{"type":"http","name":"tw","url":"acp:6f1c","headers":[]}]}`))
	f.Add([]byte(`{"mcpServers":[{"type":"acp","name":"t","id":"s1"},{"type":"stdio","name":5,"command":"x"}]}`))
	f.Add([]byte(`{"mcpServers":[{"Type":"acp","ServerId":"s1"},{"type":"acp","serverId":"s2","ID":"s3"}]}`))
	f.Add([]byte(`{"mcpServers":[{"type":"acp","name":"t","serverId":"s1"},{"type":"acp","name":"e","id":""}]}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return
		}
		r := newMCPRoutes()
		_, _, refused := r.declare(1, "session/new", params)
		got := slices.Sorted(maps.Keys(r.servers))
		ids, idless := exactServerIDs(params)
		if (refused != nil) != idless {
			t.Fatalf("declare(%s) refused: %v; an acp entry without an id: %v", params, refused, idless)
		}
		if idless {
			if len(got) > 0 {
				t.Fatalf("declare(%s) was refused, yet routes for %q", params, got)
			}
			return
		}
		want := slices.Compact(slices.Sorted(slices.Values(ids)))
		if !slices.Equal(got, want) {
			t.Fatalf("declare(%s) routes for %q; the declarations name %q", params, got, want)
		}
		for _, spelling := range []string{"", "id", "serverId"} {
			out, err := acpForm(params)
			if err != nil {
				continue
			}
			if out, err = respell(out, spelling); err != nil {
				continue
			}
			toldIDs, _ := exactServerIDs(out)
			told := slices.Compact(slices.Sorted(slices.Values(toldIDs)))
			if !slices.Equal(told, want) {
				t.Fatalf("the agent (%q) is told of %q by %s; the conductor routes for %q", spelling, told, out, want)
			}
		}
	})
}
