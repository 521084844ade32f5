package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// typeProblems checks the chain file's nodes against File's Go types, as the
// decoder reads them, and reports every key File has no field for and every
// value of a kind its field cannot hold, in the terms of the chain file: the
// key's path, what was wanted there and what was written. It walks the
// nodes rather than reading the decoder's *yaml.TypeError, whose messages
// are English sentences for people, not data.
func (f *File) typeProblems(root *yaml.Node) Problems {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	var ps Problems
	f.checkNode(&ps, "", root.Content[0], reflect.TypeFor[File]())
	return ps
}

var durationType = reflect.TypeFor[time.Duration]()

// checkNode checks n, at path, against t, and its content against t's.
func (f *File) checkNode(ps *Problems, path string, n *yaml.Node, t reflect.Type) {
	// A null leaves the field at its zero value. Aliases are not followed:
	// the decoder bounds their expansion, and reports what it finds there.
	if n.Kind == yaml.AliasNode || n.ShortTag() == "!!null" {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func() { *ps = append(*ps, f.wrongType(path, n, t)) }
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			wrong()
			return
		}
		keys := structKeys(t)
		f.checkUnique(ps, n)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				continue // <<: the decoder merges the mapping it names
			}
			field, ok := keys[k.Value]
			if !ok {
				*ps = append(*ps, f.unknownKey(path, k, t))
				continue
			}
			f.checkNode(ps, join(path, k.Value), v, field.Type)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			wrong()
			return
		}
		for i, v := range n.Content {
			f.checkNode(ps, path+"["+strconv.Itoa(i)+"]", v, t.Elem())
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong()
			return
		}
		f.checkUnique(ps, n)
		for i := 0; i+1 < len(n.Content); i += 2 {
			f.checkNode(ps, join(path, n.Content[i].Value), n.Content[i+1], t.Elem())
		}
	case reflect.String: // any scalar reads as its text
		if n.Kind != yaml.ScalarNode {
			wrong()
		}
	case reflect.Int, reflect.Int64:
		tag := n.ShortTag()
		switch {
		case n.Kind != yaml.ScalarNode:
			wrong()
		case t == durationType && tag == "!!int" && isZero(n.Value):
			f.bareZeros++ // 0 in any unit
		case t == durationType: // a string that parses, never a bare number
			if _, err := time.ParseDuration(n.Value); tag != "!!str" || err != nil {
				wrong()
			}
		case tag != "!!int" && tag != "!!float":
			wrong()
		}
	}
}

// isZero reports whether the YAML integer v is 0 (0, -0, 0x0, 0o0, ...).
func isZero(v string) bool {
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 0, 64)
	return err == nil && n == 0
}

// checkUnique reports each key of mapping n written a second time.
func (f *File) checkUnique(ps *Problems, n *yaml.Node) {
	first := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			continue
		}
		if line, dup := first[k.Value]; dup {
			*ps = append(*ps, f.problem(k.Line, "mapping key %q already defined at line %d", k.Value, line))
			continue
		}
		first[k.Value] = k.Line
	}
}

// structKeys maps the keys a struct type decodes, from its yaml tags, to
// their fields.
func structKeys(t reflect.Type) map[string]reflect.StructField {
	keys := make(map[string]reflect.StructField)
	for i := range t.NumField() {
		if name := yamlKey(t.Field(i)); name != "" {
			keys[name] = t.Field(i)
		}
	}
	return keys
}

// unknownKey reports key k, in the mapping at path, which decodes into t.
func (f *File) unknownKey(path string, k *yaml.Node, t reflect.Type) Problem {
	known := typeKeys(t)
	where := ""
	if path != "" {
		where = " in " + path
	}
	msg := fmt.Sprintf("unknown key %q%s", k.Value, where)
	if s := suggest(k.Value, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return f.problem(k.Line, "%s; known keys: %s", msg, strings.Join(known, ", "))
}

// wrongType reports n, at path, which cannot decode into t.
func (f *File) wrongType(path string, n *yaml.Node, t reflect.Type) Problem {
	if f.mistyped == nil {
		f.mistyped = map[string]bool{}
	}
	f.mistyped[path] = true
	tag := n.ShortTag()
	got := tagWords[tag]
	if got == "" {
		got = "a " + tag + " value"
	}
	if n.Kind == yaml.ScalarNode {
		got += fmt.Sprintf(" (%q)", n.Value)
	}
	want := typeWords[t.String()]
	if want == "" {
		want = t.String()
	}
	if path == "" {
		return f.problem(n.Line, "the file must be a mapping of chain settings, got %s", got)
	}
	return f.problem(n.Line, "%s: want %s, got %s", path, want, got)
}

var tagWords = map[string]string{
	"!!str":       "a string",
	"!!int":       "a number",
	"!!float":     "a number",
	"!!bool":      "a boolean",
	"!!null":      "null",
	"!!seq":       "a list",
	"!!map":       "a mapping",
	"!!timestamp": "a timestamp",
	"!!binary":    "binary data",
}

// typeWords describes the Go types of File's fields as a user would.
var typeWords = map[string]string{
	"string":            "a string",
	"int":               "an integer",
	"[]string":          "a list of strings",
	"map[string]string": "a mapping of variable names to values",
	reflect.TypeFor[time.Duration]().String(): "a duration such as 2s or 500ms",
	reflect.TypeFor[[]Component]().String():   "a list of components",
	reflect.TypeFor[Component]().String():     "a component mapping (" + strings.Join(yamlKeys[Component](), ", ") + ")",
	reflect.TypeFor[Logging]().String():       "a mapping (" + strings.Join(yamlKeys[Logging](), ", ") + ")",
	reflect.TypeFor[Trace]().String():         "a mapping (" + strings.Join(yamlKeys[Trace](), ", ") + ")",
	reflect.TypeFor[File]().String():          "a mapping of chain settings",
}

// typeKeys lists the keys a struct type decodes, in the order of its
// fields.
func typeKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name := yamlKey(t.Field(i)); name != "" {
			keys = append(keys, name)
		}
	}
	return keys
}

// yamlKey is the key a struct field decodes, from its yaml tag; "" if none.
func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// yamlKeys is typeKeys for T.
func yamlKeys[T any]() []string { return typeKeys(reflect.TypeFor[T]()) }

// suggest returns the known key closest to a misspelt one, if any is close.
// A key in the singular or plural of a known one is that one, however far
// apart they are spelt: "proxy" for "proxies" is the likeliest slip.
func suggest(name string, known []string) string {
	lower := strings.ToLower(name)
	for _, k := range known {
		if lower+"s" == k || lower == k+"s" || strings.TrimSuffix(lower, "y")+"ies" == k {
			return k
		}
	}
	best, bestDist := "", len(name)/2+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = slices.Min([]int{prev[j] + 1, cur[j-1] + 1, prev[j-1] + cost})
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
