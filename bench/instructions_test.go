package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCountInstructions runs countInstructions with a stand-in for
// valgrind that checks how it is called (cachegrind, the collector off,
// one P, one small benchmark at a time for a fixed number of ops) and
// reports 1,000,000 instructions of start-up plus a cost per op for each
// benchmark: the counts are the costs per op, start-up left out.
func TestCountInstructions(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "valgrind")
	script := `#!/bin/sh
[ "$1" = --tool=cachegrind ] && [ "$GOGC" = off ] && [ "$GOMAXPROCS" = 1 ] || { echo "called as: $* GOGC=$GOGC GOMAXPROCS=$GOMAXPROCS"; exit 2; }
case "$8" in
"BenchmarkRelay/^small$/^copy$") per=1500 ;;
"BenchmarkRelay/^small$/^request$") per=10000 ;;
*) per=4000 ;;
esac
n=${10%x}
echo "==7== I   refs:      $((1000000 + n * per))" | sed 's/\([0-9]\)\([0-9][0-9][0-9]\)$/\1,\2/' >&2
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	counts, err := countInstructions(fake, "conductor.test")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"small/copy": 1500, "small/notify": 4000, "small/wrap": 4000, "small/unwrap": 4000, "small/request": 10000,
		"small/written": 4000, "small/lent": 4000}
	if len(counts) != len(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
	for name, n := range want {
		if counts[name] != n {
			t.Errorf("%s: %v instructions per op, want %v", name, counts[name], n)
		}
	}

	// A valgrind that fails, or prints no count, fails the count.
	for _, body := range []string{"exit 1", "echo nothing"} {
		if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := countInstructions(fake, "conductor.test"); err == nil || !strings.Contains(err.Error(), "small/copy") {
			t.Errorf("valgrind that does %q: error %v, want one naming small/copy", body, err)
		}
	}
}
