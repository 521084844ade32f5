package proxy_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/acp-conductor/acp-conductor/proxy"
)

func TestEditMember(t *testing.T) {
	set := func(v string) func(json.RawMessage) (json.RawMessage, error) {
		return func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(v), nil }
	}
	tests := []struct {
		obj, name string
		edit      func(json.RawMessage) (json.RawMessage, error)
		want      string
	}{
		{`{"a":1, "b" : [1, 2] ,"c":3}`, "b", set(`"x"`), `{"a":1, "b" : "x" ,"c":3}`},
		{`{"a":1}`, "z", set(`{"k":true}`), `{"a":1,"z":{"k":true}}`},
		{`{ }`, "z", set(`1`), `{ "z":1}`},
		{``, "z", set(`1`), `{"z":1}`},
		{`null`, "z", set(`1`), `{"z":1}`},
		{`{"a":1,"a":2}`, "a", set(`3`), `{"a":1,"a":3}`},
		{`{"a":"\u00e9\n"}`, "b", set("[1,\n2]"), `{"a":"\u00e9\n","b":[1,2]}`},
		{`{"a":1}`, "a", set(``), `{"a":1}`},
		{`{"a":1}`, "a", func(json.RawMessage) (json.RawMessage, error) { return nil, nil }, `{"a":1}`},
		{`{"a":[1]}`, "a", func(old json.RawMessage) (json.RawMessage, error) {
			return append(json.RawMessage(`[0,`), old[1:]...), nil
		}, `{"a":[0,1]}`},
	}
	for _, tt := range tests {
		got, err := proxy.EditMember(json.RawMessage(tt.obj), tt.name, tt.edit)
		if err != nil || string(got) != tt.want {
			t.Errorf("EditMember(%s, %q) = %s, %v; want %s", tt.obj, tt.name, got, err, tt.want)
		}
	}

	for _, bad := range []string{`[]`, `"s"`, `{"a":`} {
		if _, err := proxy.EditMember(json.RawMessage(bad), "a", set(`1`)); err == nil {
			t.Errorf("EditMember(%s) succeeded; want an error", bad)
		}
	}
	if _, err := proxy.EditMember(json.RawMessage(`{}`), "a", set(`{`)); err == nil {
		t.Error("EditMember accepted an invalid value")
	}
	boom := errors.New("boom")
	if _, err := proxy.EditMember(json.RawMessage(`{}`), "a", func(json.RawMessage) (json.RawMessage, error) { return nil, boom }); err != boom {
		t.Errorf("EditMember: got %v, want the edit's error", err)
	}
}
