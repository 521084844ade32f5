package config

import (
	"os"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// FuzzParse checks that no chain file, however malformed, makes Parse panic,
// and that what Parse accepts is consistent with what it promises.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/chain.yaml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			ps, ok := err.(Problems)
			if !ok || len(ps) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty Problems", err, err)
			}
			for _, p := range ps {
				if p.Line == 0 && strings.HasPrefix(p.Msg, "line ") {
					t.Fatalf("the decoder found what the node walk did not: %s", p.Msg)
				}
			}
			return
		}
		for _, mode := range []conductor.Mode{conductor.AgentMode, conductor.ProxyMode} {
			_ = file.Check(mode)
		}
		names := make(map[string]bool)
		for _, c := range append(file.Proxies, derefOr(file.Agent)...) {
			if strings.TrimSpace(c.Command) == "" {
				t.Fatalf("accepted a component without a command: %+v", c)
			}
			if c.Name != "" && names[c.Name] {
				t.Fatalf("accepted duplicate name %q", c.Name)
			}
			names[c.Name] = true
		}
		_ = file.settings()
	})
}

func derefOr(c *Component) []Component {
	if c == nil {
		return nil
	}
	return []Component{*c}
}
