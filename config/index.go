package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An index maps each key and list item of a chain file, by path, to its
// nodes: "proxies[1].env.API_KEY" to the key API_KEY and its value. Decoding
// into structs forgets positions; the index keeps them for messages.
type index map[string]entry

type entry struct {
	key *yaml.Node // nil for a list item
	val *yaml.Node
}

func newIndex(root *yaml.Node) index {
	idx := make(index)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		idx[""] = entry{nil, root.Content[0]}
		idx.add("", root.Content[0])
	}
	return idx
}

func (idx index) add(path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if _, dup := idx[p]; !dup { // yaml reports duplicate keys itself
				idx[p] = entry{k, v}
				idx.add(p, v)
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			idx[p] = entry{nil, v}
			idx.add(p, v)
		}
	}
	// Aliases are not followed: the decoder bounds their expansion, and
	// following them here could repeat a subtree without end.
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// line returns the line of path's key, or of its list item, or failing that
// of the nearest enclosing path that has one; 0 if none does.
func (idx index) line(path string) int {
	for {
		if e, ok := idx[path]; ok {
			if e.key != nil {
				return e.key.Line
			}
			return e.val.Line
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

// has reports whether path was written in the file.
func (idx index) has(path string) bool {
	_, ok := idx[path]
	return ok
}

// parent returns the path enclosing path: "proxies[0]" for
// "proxies[0].command", "" for "name".
func parent(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}
