package proxy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Go program in README.md's "Writing proxies" builds as it is written.
// It is built as if it were a package of this module's, through an overlay,
// so that it is built against the proxy package as it stands.
func TestREADMEProgram(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Writing proxies\n")
	_, code, ok2 := strings.Cut(section, "\n```go\n")
	code, _, ok3 := strings.Cut(code, "\n```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`README.md has no Go block under "## Writing proxies"`)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, overlay := filepath.Join(dir, "main.go"), filepath.Join(dir, "overlay.json")
	replace, _ := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(wd, "internal", "readme", "main.go"): src},
	})
	if err := os.WriteFile(src, []byte(code+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overlay, replace, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", os.DevNull, "./internal/readme")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s\n%s", err, out, code)
	}
}
