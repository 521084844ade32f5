package injector

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// write creates the file path (and its directories) with the given text.
func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "CLAUDE.md"), "root claude")
	write(t, filepath.Join(root, "a", "AGENTS.md"), "a agents")
	write(t, filepath.Join(root, "a", "CLAUDE.md"), "a claude")
	write(t, filepath.Join(root, "a", "b", "c", "notes.txt"), "")
	os.MkdirAll(filepath.Join(root, "d", "CLAUDE.md"), 0o755) // a directory, not a file

	names := []string{"AGENTS.md", "CLAUDE.md"}
	for _, c := range []struct {
		dir, want string
	}{
		{"a", "a/AGENTS.md"},           // both here: the first name wins
		{"a/b/c", "a/AGENTS.md"},       // nearest directory up
		{".", "CLAUDE.md"},             // the second name when the first is absent
		{"d", "CLAUDE.md"},             // a directory of that name does not count
		{"a/b/c/../..", "a/AGENTS.md"}, // unclean paths are cleaned
	} {
		got, ok := Find(filepath.Join(root, c.dir), names)
		if want := filepath.Join(root, c.want); !ok || got != want {
			t.Errorf("Find(%s) = %q, %v; want %q", c.dir, got, ok, want)
		}
	}
	if got, ok := Find(filepath.Join(root, "a", "b"), []string{"NOPE-" + filepath.Base(root) + ".md"}); ok {
		t.Errorf("Find with an absent name = %q", got)
	}
}

func TestReadCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "AGENTS.md")
	write(t, path, "héllo") // é is 2 bytes: h=0, é=1..2, l=3

	got, err := readCapped(path, 100)
	if err != nil || got != "héllo" {
		t.Errorf("under the cap: %q, %v", got, err)
	}
	got, err = readCapped(path, 2) // cuts é in half
	if err != nil || !strings.HasPrefix(got, "h\n\n[The rest of this file is left out") || !utf8.ValidString(got) {
		t.Errorf("cut inside a character: %q, %v", got, err)
	}
	got, err = readCapped(path, 3)
	if err != nil || !strings.HasPrefix(got, "hé\n\n[The rest") {
		t.Errorf("cut after a character: %q, %v", got, err)
	}
}

func TestPrepend(t *testing.T) {
	block := json.RawMessage(`{"type":"text","text":"x"}`)
	for in, want := range map[string]string{
		`[{"type":"text", "text":"a\u00e9<"}]`: `[{"type":"text","text":"x"},{"type":"text", "text":"a\u00e9<"}]`,
		` [ ] `:                                `[{"type":"text","text":"x"} ]`,
	} {
		got, err := prepend(json.RawMessage(in), block)
		if err != nil || string(got) != want || !json.Valid(got) {
			t.Errorf("prepend(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := prepend(json.RawMessage(`{"a":1}`), block); err == nil {
		t.Error("prepend to an object succeeded")
	}
}
