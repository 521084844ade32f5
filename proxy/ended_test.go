package proxy

import "testing"

// TestEndedConns: the proxy remembers the last limit connections it ended
// or forgot, the oldest going first, and whether each was upstream; one
// remembered again keeps its place.
func TestEndedConns(t *testing.T) {
	type op struct {
		add      string
		upstream bool
	}
	for _, c := range []struct {
		name string
		ops  []op
		want map[string]bool // remembered: upstream
	}{
		{"none", nil, map[string]bool{}},
		{"within the limit", []op{{"a", false}, {"b", true}, {"c", false}}, map[string]bool{"a": false, "b": true, "c": false}},
		{"the oldest goes", []op{{"a", false}, {"b", true}, {"c", false}, {"d", true}, {"e", false}}, map[string]bool{"c": false, "d": true, "e": false}},
		{"again keeps its place", []op{{"a", false}, {"b", false}, {"a", true}, {"c", false}, {"d", false}}, map[string]bool{"b": false, "c": false, "d": false}},
		{"again, latest kind", []op{{"a", false}, {"a", true}}, map[string]bool{"a": true}},
		{"around the ring", []op{{"a", false}, {"b", false}, {"c", false}, {"d", false}, {"e", false}, {"f", false}, {"g", false}}, map[string]bool{"e": false, "f": false, "g": false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := endedConns{limit: 3}
			for _, o := range c.ops {
				e.add(o.add, o.upstream)
			}
			if len(e.upstream) != len(c.want) || len(e.order) > e.limit {
				t.Errorf("remembers %v in %v; want %v", e.upstream, e.order, c.want)
			}
			for id, up := range c.want {
				if gotUp, ok := e.lookup(id); !ok || gotUp != up {
					t.Errorf("%s: remembered %v, upstream %v; want upstream %v", id, ok, gotUp, up)
				}
			}
		})
	}
}
