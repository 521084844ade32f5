package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Instructions per message, counted under valgrind's cachegrind: the one
// figure of the relay's own work that this machine's noise does not move.
// Between processes a change of less than about a microsecond, or of 3-5 %
// of updates/s, does not show (bench/README.md), while two counts of the
// same code differ by up to about 50 instructions; so a change to the relay's
// work is judged here, and the chain's figures say what it is worth.

// countedBenchmarks are the small in-process benchmarks whose ops are
// counted; copy is the baseline of the ratios. written and lent, the same
// update relayed with the lend trick off and on, show what it saves.
var countedBenchmarks = []string{"copy", "notify", "wrap", "unwrap", "request", "written", "lent"}

// Each benchmark runs twice, countLow and countHigh ops: the difference
// leaves out the test binary's start and the benchmark's set-up.
const countLow, countHigh = 2000, 12000

// instructions returns the instructions one op of each small benchmark
// takes, by name (small/notify, ...). The collector is off, so that when
// it runs does not move the count, and one P runs. Without valgrind it
// says so and returns nil.
func (b *bench) instructions() (map[string]float64, error) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		progress("no valgrind: the instruction counts are left out")
		return nil, nil
	}
	exe := filepath.Join(b.dir, "conductor.test")
	if err := b.goCmd("test", "-c", "-o", exe, "./conductor"); err != nil {
		return nil, err
	}
	return countInstructions(vg, exe)
}

// countInstructions counts the benchmarks of exe, the conductor's test
// binary, under valgrind.
func countInstructions(vg, exe string) (map[string]float64, error) {
	counts := make(map[string]float64)
	for _, name := range countedBenchmarks {
		progress("instructions per op of BenchmarkRelay/small/%s, under cachegrind", name)
		var ir [2]float64
		for i, n := range []int{countLow, countHigh} {
			var err error
			if ir[i], err = countOps(vg, exe, name, n); err != nil {
				return nil, err
			}
		}
		counts["small/"+name] = (ir[1] - ir[0]) / (countHigh - countLow)
	}
	return counts, nil
}

var instructionsLine = regexp.MustCompile(`I\s+refs:\s+([\d,]+)`)

// countOps returns the instructions a run of n ops of the named small
// benchmark executes, start-up included.
func countOps(valgrind, exe, name string, n int) (float64, error) {
	cmd := exec.Command(valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
		exe, "-test.run", "^$", "-test.bench", "BenchmarkRelay/^small$/^"+name+"$", "-test.benchtime", fmt.Sprintf("%dx", n))
	cmd.Env = append(os.Environ(), "GOGC=off", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("cachegrind, small/%s: %w\n%s", name, err, out)
	}
	m := instructionsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("cachegrind, small/%s: no instruction count in:\n%s", name, out)
	}
	return strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
}
