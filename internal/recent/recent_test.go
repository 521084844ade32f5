package recent

import (
	"fmt"
	"testing"
)

func TestMap(t *testing.T) {
	r := Map[string, int]{Limit: 3}
	for i := range 5 {
		r.Add(fmt.Sprint("k", i), i)
	}
	// k0 and k1 went, oldest first; the last three stay.
	for i, want := range []bool{false, false, true, true, true} {
		v, ok := r.Get(fmt.Sprint("k", i))
		if ok != want || ok && v != i {
			t.Errorf("k%d: %d, %v; want held %v", i, v, ok, want)
		}
	}
	if r.Len() != 3 {
		t.Errorf("Len = %d, want 3", r.Len())
	}

	// A key held keeps its place: adding it again changes its value and
	// drops nothing.
	r.Add("k2", 20)
	if v, _ := r.Get("k2"); v != 20 || r.Len() != 3 {
		t.Errorf("k2 = %d with %d held; want 20 with 3", v, r.Len())
	}
	r.Add("k5", 5) // takes k2's place, the oldest
	if _, ok := r.Get("k2"); ok {
		t.Error("k2, the oldest, is still held after a fourth key")
	}

	// A deleted key is gone at once, and its place is taken in turn.
	r.Delete("k3")
	if _, ok := r.Get("k3"); ok || r.Len() != 2 {
		t.Errorf("after Delete(k3): held %v, %d keys; want gone, 2", ok, r.Len())
	}
	seen := map[string]int{}
	for k, v := range r.All() {
		seen[k] = v
	}
	if len(seen) != 2 || seen["k4"] != 4 || seen["k5"] != 5 {
		t.Errorf("All yields %v, want k4:4 and k5:5", seen)
	}

	// Never more than Limit, however many keys come.
	for i := range 1000 {
		r.Add(fmt.Sprint("n", i), i)
	}
	if r.Len() != 3 {
		t.Errorf("after 1000 more keys Len = %d, want 3", r.Len())
	}
}

// A Map without a Limit holds nothing, rather than failing.
func TestMapNoLimit(t *testing.T) {
	var r Map[int, int]
	r.Add(1, 1)
	if _, ok := r.Get(1); ok || r.Len() != 0 {
		t.Errorf("a Map without a Limit holds %d keys", r.Len())
	}
}

// TestMapTable: the last Limit keys are held, the oldest going first, each
// with its latest value; a key added again keeps its place.
func TestMapTable(t *testing.T) {
	type op struct {
		add string
		v   bool
	}
	for _, c := range []struct {
		name string
		ops  []op
		want map[string]bool
	}{
		{"none", nil, map[string]bool{}},
		{"within the limit", []op{{"a", false}, {"b", true}, {"c", false}}, map[string]bool{"a": false, "b": true, "c": false}},
		{"the oldest goes", []op{{"a", false}, {"b", true}, {"c", false}, {"d", true}, {"e", false}}, map[string]bool{"c": false, "d": true, "e": false}},
		{"again keeps its place", []op{{"a", false}, {"b", false}, {"a", true}, {"c", false}, {"d", false}}, map[string]bool{"b": false, "c": false, "d": false}},
		{"again, latest value", []op{{"a", false}, {"a", true}}, map[string]bool{"a": true}},
		{"around the ring", []op{{"a", false}, {"b", false}, {"c", false}, {"d", false}, {"e", false}, {"f", false}, {"g", false}}, map[string]bool{"e": false, "f": false, "g": false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Map[string, bool]{Limit: 3}
			for _, o := range c.ops {
				r.Add(o.add, o.v)
			}
			if r.Len() != len(c.want) {
				t.Errorf("holds %d keys; want %v", r.Len(), c.want)
			}
			for k, want := range c.want {
				if got, ok := r.Get(k); !ok || got != want {
					t.Errorf("%s: held %v, value %v; want %v", k, ok, got, want)
				}
			}
		})
	}
}
