package proxy

import (
	"encoding/json"
	"strconv"
	"testing"
)

func TestOwnID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int64
		ours bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"999999999999999999", 999999999999999999, true},
		{"1000000000000000000", 0, false}, // longer than any id the proxy gives
		{"0", 0, false},                   // the proxy numbers from 1
		{"07", 0, false},
		{`"7"`, 0, false},
		{"-7", 0, false},
		{"7.0", 0, false},
		{"7e0", 0, false},
		{"null", 0, false},
		{"", 0, false},
	} {
		n, ours := ownID(json.RawMessage(tc.id))
		if n != tc.n || ours != tc.ours {
			t.Errorf("ownID(%s) = %d, %v; want %d, %v", tc.id, n, ours, tc.n, tc.ours)
		}
	}
}

// FuzzOwnID checks ownID, which reads the ids of the responses the proxy
// receives, against strconv: it accepts exactly the ids the proxy gives,
// positive integers as strconv writes them, and reads each as its value.
func FuzzOwnID(f *testing.F) {
	for _, s := range []string{"1", "12", "0", "-1", "01", `"1"`, "1e3", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n, ours := ownID(json.RawMessage(id))
		v, err := strconv.ParseInt(id, 10, 64)
		given := err == nil && v > 0 && strconv.FormatInt(v, 10) == id && len(id) <= 18
		if ours != given || ours && n != v {
			t.Fatalf("ownID(%q) = %d, %v; the proxy gives it: %v (%d)", id, n, ours, given, v)
		}
	})
}
