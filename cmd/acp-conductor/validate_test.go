package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/transport"
)

// TestValidateHelpSample: the chain file that validate's help shows is one
// that validate and config.Load accept, holds every key config's types
// decode (from their yaml tags, so the help cannot fall behind them), and
// sets each setting to its default, as the help says.
func TestValidateHelpSample(t *testing.T) {
	help := acp(t, "", nil, "validate", "--help").stdout
	// The sample is the last paragraph of the long help, indented.
	long, _, ok := strings.Cut(help, "\n\nUsage:")
	paras := strings.Split(long, "\n\n")
	sample := paras[len(paras)-1]
	if !ok || !strings.HasPrefix(sample, "  name:") {
		t.Fatalf("no sample chain file before Usage:\n%s", help)
	}
	sample = regexp.MustCompile(`(?m)^  `).ReplaceAllString(sample, "") + "\n"
	file := writeFile(t, "sample.yaml", sample)

	// Its headers' variables set, and no other ACP_CONDUCTOR_ variable.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.EnvPrefix) {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	var env []string
	for _, m := range regexp.MustCompile(`\$\{(\w+)\}`).FindAllStringSubmatch(sample, -1) {
		t.Setenv(m[1], "x")
		env = append(env, m[1]+"=x")
	}
	if r := acp(t, "", env, "validate", "--no-commands", file); r.code != 0 || r.stderr != "" {
		t.Errorf("validate: exit %d, stderr:\n%s\nthe sample:\n%s", r.code, r.stderr, sample)
	}

	var root yaml.Node
	if err := yaml.Unmarshal([]byte(sample), &root); err != nil {
		t.Fatal(err)
	}
	fileType := reflect.TypeFor[config.File]()
	have, want := make(map[string]bool), make(map[string]bool)
	sampleKeys(root.Content[0], fileType, "", have)
	schemaKeys(fileType, "", want)
	for k := range want {
		if !have[k] {
			t.Errorf("the sample lacks %s", k)
		}
	}
	for k := range have {
		if !want[k] {
			t.Errorf("the sample has %s, which config does not decode", k)
		}
	}

	got, err := config.Load(config.Options{Mode: conductor.AgentMode, File: file})
	if err != nil {
		t.Fatal(err)
	}
	def, err := config.Load(config.Options{Mode: conductor.ProxyMode})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Proxies[len(got.Proxies)-1].PingInterval; p == nil || *p != transport.DefaultPingInterval {
		t.Errorf("the sample's ping_interval is %v, not the default %v", p, transport.DefaultPingInterval)
	}
	got.Name, got.Mode, got.Proxies, got.Agent, got.File = "", 0, nil, config.Component{}, ""
	got.SpinFrom, got.MaxMessageBytesFrom, got.LogFileFrom, got.TraceFileFrom = "", "", "", "" // where they were set, the sample, not settings
	def.Name, def.Mode, def.Proxies, def.Agent, def.File = "", 0, nil, config.Component{}, ""
	if !reflect.DeepEqual(got, def) {
		t.Errorf("the sample's settings are\n%+v\nnot the defaults\n%+v", *got, *def)
	}
}

// schemaKeys adds to keys the path of each key that t, a type config
// decodes a chain file into, decodes: "logging.level", and "component.url"
// for a key of any component.
func schemaKeys(t reflect.Type, prefix string, keys map[string]bool) {
	for _, f := range reflect.VisibleFields(t) {
		name := yamlName(f)
		if name == "" {
			continue
		}
		keys[prefix+name] = true
		if st := structType(f.Type); st != nil {
			schemaKeys(st, childPrefix(st, prefix+name), keys)
		}
	}
}

// sampleKeys adds to keys the path of each key of n, decoded as t, in the
// form schemaKeys gives; it descends only into what t decodes as structs,
// so that env's and headers' names are not taken for keys.
func sampleKeys(n *yaml.Node, t reflect.Type, prefix string, keys map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for _, item := range n.Content {
			sampleKeys(item, t.Elem(), prefix, keys)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := make(map[string]reflect.StructField)
		for _, f := range reflect.VisibleFields(t) {
			fields[yamlName(f)] = f
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			keys[prefix+k] = true
			if f, ok := fields[k]; ok && k != "" {
				if st := structType(f.Type); st != nil {
					sampleKeys(n.Content[i+1], f.Type, childPrefix(st, prefix+k), keys)
				}
			}
		}
	}
}

// yamlName is the key field f decodes, or "" for none.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch {
	case !f.IsExported() || name == "-":
		return ""
	case name == "":
		return strings.ToLower(f.Name)
	}
	return name
}

// structType is the struct type t decodes a mapping or a list of mappings
// into, or nil.
func structType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return t
	}
	return nil
}

// childPrefix gives the keys of a component one prefix, wherever the
// component is (proxies or agent), and those of any other struct their
// path.
func childPrefix(t reflect.Type, path string) string {
	if t == reflect.TypeFor[config.Component]() {
		return "component."
	}
	return path + "."
}

// TestSingularKey: "proxy:" for "proxies:", too far from it for an edit
// distance to suggest, is refused with the key it meant, on stderr only.
func TestSingularKey(t *testing.T) {
	file := writeFile(t, "chain.yaml", "proxy:\n  - command: cat\nagent:\n  command: cat\n")
	for _, args := range [][]string{{"agent", "--config", file}, {"validate", file}} {
		r := acp(t, "", nil, args...)
		if want := file + `:1: unknown key "proxy" (did you mean "proxies"?)`; r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1, nothing and %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
}
