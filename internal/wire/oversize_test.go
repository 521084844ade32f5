package wire

import (
	"encoding/json"
	"testing"
)

func TestRefuseBatch(t *testing.T) {
	e := Errorf(-32600, "too long")
	unkept := Errorf(-32600, "too long; 2 ids not kept")
	const (
		refused = `"error":{"code":-32600,"message":"too long"}}`
		null    = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too long; 2 ids not kept"}}`
	)
	req := func(id string) OversizeEntry { return OversizeEntry{ID: json.RawMessage(id)} }
	resp := func(id string) OversizeEntry { return OversizeEntry{ID: json.RawMessage(id), IsResponse: true} }
	for _, tt := range []struct {
		name    string
		entries []OversizeEntry
		unkept  *Error
		want    string // "" for nil
	}{
		{"nothing", nil, nil, ""},
		{"responses only", []OversizeEntry{resp("1"), resp(`"a"`)}, nil, ""},
		{"one request", []OversizeEntry{req("1")}, nil, `[{"jsonrpc":"2.0","id":1,` + refused + `]`},
		{"ids as they came", []OversizeEntry{req(`"a\u0062"`), resp("2"), req("3.0")}, nil,
			`[{"jsonrpc":"2.0","id":"a\u0062",` + refused + `,{"jsonrpc":"2.0","id":3.0,` + refused + `]`},
		{"with unkept", []OversizeEntry{req("1"), resp("2")}, unkept, `[{"jsonrpc":"2.0","id":1,` + refused + `,` + null + `]`},
		{"only unkept", []OversizeEntry{resp("2")}, unkept, `[` + null + `]`},
	} {
		got := RefuseBatch(tt.entries, e, tt.unkept)
		if tt.want == "" {
			if got != nil {
				t.Errorf("%s: RefuseBatch = %s, want nil", tt.name, got)
			}
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s: RefuseBatch =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: RefuseBatch = %s, not JSON", tt.name, got)
		}
	}
}
