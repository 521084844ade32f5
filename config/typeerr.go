package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// typeProblem rewords one entry of a *yaml.TypeError, which reads like
// "line 5: field comand not found in type config.Component", in the terms of
// the chain file, naming the key's path and what was wanted there.
func (f *File) typeProblem(msg string) Problem {
	line, rest := cutLine(msg)
	if after, ok := strings.CutPrefix(rest, "field "); ok {
		if i := strings.LastIndex(after, " not found in type "); i >= 0 {
			return f.unknownKey(line, after[:i])
		}
	}
	if after, ok := strings.CutPrefix(rest, "cannot unmarshal "); ok {
		tag, _, _ := strings.Cut(after, " ")
		if i := strings.LastIndex(after, " into "); i >= 0 {
			return f.wrongType(line, tag, after[i+len(" into "):])
		}
	}
	return f.problem(line, "%s", rest)
}

func (f *File) unknownKey(line int, name string) Problem {
	path, ok := f.nodes.keyAt(line, name)
	if !ok {
		return f.problem(line, "unknown key %q", name)
	}
	known := knownKeys(parent(path))
	where := ""
	if p := parent(path); p != "" {
		where = " in " + p
	}
	msg := fmt.Sprintf("unknown key %q%s", name, where)
	if s := suggest(name, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return f.problem(line, "%s; known keys: %s", msg, strings.Join(known, ", "))
}

func (f *File) wrongType(line int, tag, goType string) Problem {
	kind := yaml.ScalarNode
	switch tag {
	case "!!map":
		kind = yaml.MappingNode
	case "!!seq":
		kind = yaml.SequenceNode
	}
	got := tagWords[tag]
	if got == "" {
		got = "a " + tag + " value"
	}
	want := typeWords[goType]
	if want == "" {
		want = goType
	}
	path, n, ok := f.nodes.valueAt(line, kind)
	if !ok {
		return f.problem(line, "want %s, got %s", want, got)
	}
	if kind == yaml.ScalarNode {
		got += fmt.Sprintf(" (%q)", n.Value)
	}
	if path == "" {
		return f.problem(line, "the file must be a mapping of chain settings, got %s", got)
	}
	return f.problem(line, "%s: want %s, got %s", path, want, got)
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

// knownKeys lists the keys allowed in the mapping at path.
func knownKeys(path string) []string {
	switch {
	case path == "":
		return yamlKeys[File]()
	case path == "logging":
		return yamlKeys[Logging]()
	case path == "trace":
		return yamlKeys[Trace]()
	}
	return yamlKeys[Component]()
}

// yamlKeys lists the keys a struct type decodes, from its yaml tags.
func yamlKeys[T any]() []string {
	var keys []string
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// suggest returns the known key closest to a misspelt one, if any is close.
func suggest(name string, known []string) string {
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
