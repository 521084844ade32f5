// Command bench is acp-conductor's benchmark suite. Run it from anywhere in
// the module:
//
//	go run ./bench            # the full run, a few minutes on 2 cores
//	go run ./bench -quick     # a short run, about a minute
//	go run ./bench -out perf.md -profile /tmp/prof
//
// It builds the conductor (./cmd/acp-conductor) and the helper program
// bench/peer (a fast agent, a passthrough proxy built with package proxy, and
// the editor), then runs every scenario against the same agent and editor:
// directly, through two byte-copying relays (one in Go, and one in C when
// the machine has a C compiler), through the conductor with 0, 1, 3 and 10
// proxies, and through Go copiers, and C copiers, in series making those
// chains' crossings (the floor of a proxy hop). It prints a markdown table
// in which every figure stands beside its ratio to the direct run of the
// same invocation, and a list of the project's performance targets, each
// PASS or MISS. See bench/README.md.
//
// With -profile DIR it also runs the conductor's relay in-process (bench/peer
// conductor, which calls conductor.Run) under the throughput and the 16 MiB
// scenarios with pprof, and leaves the profiles and their top entries in DIR.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

func main() {
	quick := flag.Bool("quick", false, "a short run (about a minute) with fewer prompts and one round")
	out := flag.String("out", "", "also write the markdown tables to this file")
	profile := flag.String("profile", "", "also profile the in-process relay, writing pprof files to this directory")
	rounds := flag.Int("rounds", 0, "rounds of the chain sweep (default 3, or 1 with -quick)")
	profileOnly := flag.Bool("profile-only", false, "with -profile, skip the table and only profile")
	only := flag.String("only", "", "run only this scenario and print its table (and its targets): sdk, startup or tricks")
	flag.Parse()
	if *profileOnly && *profile == "" {
		fmt.Fprintln(os.Stderr, "bench: -profile-only needs -profile DIR")
		os.Exit(2)
	}
	if *only != "" && *only != "sdk" && *only != "startup" && *only != "tricks" {
		fmt.Fprintf(os.Stderr, "bench: -only %s: the scenarios that run alone are sdk, startup and tricks\n", *only)
		os.Exit(2)
	}
	if err := run(*quick, *out, *profile, *rounds, *profileOnly, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// emit prints the tables to stdout and, with -out, to the file out too.
func emit(tables, out string) error {
	fmt.Print(tables)
	if out == "" {
		return nil
	}
	return os.WriteFile(out, []byte(tables), 0o644)
}

// plan is how much of everything one run does.
type plan struct {
	rounds                          int // chain sweep rounds, interleaved
	warmup, latency, tp3, tp100     int // stream scenario prompts
	bigRuns                         int
	bigBytes                        int
	sessions, prompts, concUpdate   int
	concRuns                        int
	startRepeat                     int
	benchtime                       string
	sdkWarmup, sdkLatency, sdkTP100 int // sdk scenario prompts
}

func newPlan(quick bool, rounds int) plan {
	p := plan{rounds: 3, warmup: 200, latency: 2000, tp3: 1000, tp100: 300,
		bigRuns: 3, bigBytes: 16 << 20, sessions: 200, prompts: 20, concUpdate: 3, concRuns: 2,
		startRepeat: 15, benchtime: "1s", sdkWarmup: 100, sdkLatency: 1000, sdkTP100: 50}
	if quick {
		p = plan{rounds: 1, warmup: 50, latency: 400, tp3: 200, tp100: 100,
			bigRuns: 1, bigBytes: 16 << 20, sessions: 200, prompts: 20, concUpdate: 3, concRuns: 1,
			startRepeat: 5, benchtime: "200ms", sdkWarmup: 50, sdkLatency: 300, sdkTP100: 20}
	}
	if rounds > 0 {
		p.rounds = rounds
	}
	return p
}

// bench holds the built programs and the results as they come in.
type bench struct {
	root      string // module root
	dir       string // build output
	conductor string // the acp-conductor binary
	peer      string // the bench/peer binary
	crelay    string // bench/crelay, or "" without a C compiler
	plan      plan
}

func run(quick bool, out, profile string, rounds int, profileOnly bool, only string) error {
	start := time.Now()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "acp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if strings.ContainsAny(dir, " \t'\"\\") {
		return fmt.Errorf("temporary directory %q needs quoting; set TMPDIR", dir)
	}
	b := &bench{root: root, dir: dir, plan: newPlan(quick, rounds),
		conductor: filepath.Join(dir, "acp-conductor"), peer: filepath.Join(dir, "peer")}
	env := describeEnv()
	progress("building the conductor and bench/peer")
	// The conductor is built as make build and the Dockerfile build it: a
	// static binary, which starts about 10 ms sooner than a cgo build
	// (go install where a C compiler is present), itself and its watchdog.
	if err := b.goCmd("build", "-trimpath", "-o", b.conductor, "./cmd/acp-conductor"); err != nil {
		return err
	}
	if err := b.goCmd("build", "-o", b.peer, "./bench/peer"); err != nil {
		return err
	}
	b.buildCRelay()

	if profileOnly {
		return b.profile(profile)
	}
	switch only {
	case "sdk":
		return b.sdkOnly(out)
	case "startup":
		return b.startupOnly(out)
	case "tricks":
		return b.tricksOnly(out)
	}
	var r results
	if r.sweep, r.sweepRounds, err = b.sweep(); err != nil {
		return err
	}
	if r.sdk, r.sdkRounds, err = b.sdk(); err != nil {
		return err
	}
	if r.big, err = b.big(); err != nil {
		return err
	}
	if r.conc, err = b.concurrent(); err != nil {
		return err
	}
	if r.start, err = b.startup(); err != nil {
		return err
	}
	if r.trick, err = b.tricks(); err != nil {
		return err
	}
	if r.relay, err = b.goBench(); err != nil {
		return err
	}
	counts, err := b.instructions()
	if err != nil {
		return err
	}
	for i := range r.relay {
		r.relay[i].instructions = counts[r.relay[i].name]
	}
	env.loadAfter = loadAvg()
	env.elapsed = time.Since(start)
	env.plan = b.plan
	report := r.markdown(env)
	if err := emit(report, out); err != nil {
		return err
	}
	if profile != "" {
		return b.profile(profile)
	}
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run go run ./bench inside the acp-conductor module")
	}
	return filepath.Dir(mod), nil
}

// goCmd runs the go command in the module root, failing with its output.
// Builds are static (CGO_ENABLED=0), as make build's is.
func (b *bench) goCmd(args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// buildCRelay builds bench/crelay with the system's C compiler. Without
// one, the run goes on without that baseline, and says so.
func (b *bench) buildCRelay() {
	cc, err := exec.LookPath("cc")
	if err != nil {
		progress("no C compiler (cc): the C relay baseline is left out")
		return
	}
	exe := filepath.Join(b.dir, "crelay")
	cmd := exec.Command(cc, "-O2", "-pthread", "-o", exe, filepath.Join("bench", "crelay", "relay.c"))
	cmd.Dir = b.root
	if out, err := cmd.CombinedOutput(); err != nil {
		progress("building bench/crelay failed, so its baseline is left out: %v\n%s", err, out)
		return
	}
	b.crelay = exe
}

// A chain is one way of connecting the editor to the agent.
type chain struct {
	name string
	kind string // "direct", "relay", "crelay", "copiers", "ccopiers", "conductor" or "traced"
	// For "conductor", its proxies; for "copiers" and "ccopiers", those of
	// the conductor chain whose crossings the copiers make (see copierChain).
	proxies int
}

var (
	direct = chain{name: "direct (no conductor)", kind: "direct"}
	relay  = chain{name: "byte-copying relay process (Go, io.Copy)", kind: "relay"}
	crelay = chain{name: "byte-copying relay process (C, blocking threads)", kind: "crelay"}
	// traced is the conductor with no proxy writing a trace of every
	// message to a file (--trace): what tracing costs.
	traced = chain{name: "conductor, 0 proxies, traced to a file", kind: "traced"}
)

func conductorChain(n int) chain {
	return chain{name: fmt.Sprintf("conductor, %d %s", n, plural(n, "proxy", "proxies")), kind: "conductor", proxies: n}
}

// copierChain is 2n+1 Go copiers in series: each way, a message crosses as
// many processes, over as many pipes, as through the conductor with n
// proxies (the conductor n+1 times, each proxy once), and not one of them
// parses it. Against the single Go copier, it is what n proxy hops cost
// when every crossing is an io.Copy: the floor of a hop on this machine.
func copierChain(n int) chain {
	return chain{name: fmt.Sprintf("%d Go copiers in series (the crossings of %d %s)", 2*n+1, n, plural(n, "proxy", "proxies")),
		kind: "copiers", proxies: n}
}

// cCopierChain is copierChain with the C copier: the same crossings with
// no language runtime in any of them, which says how much of a hop's
// floor is the Go runtime's.
func cCopierChain(n int) chain {
	return chain{name: fmt.Sprintf("%d C copiers in series (the crossings of %d %s)", 2*n+1, n, plural(n, "proxy", "proxies")),
		kind: "ccopiers", proxies: n}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// argv is the command the editor launches for c.
func (b *bench) argv(c chain) []string {
	agent := []string{b.peer, "agent"}
	switch c.kind {
	case "direct":
		return agent
	case "relay":
		return append([]string{b.peer, "relay"}, agent...)
	case "crelay":
		return append([]string{b.crelay}, agent...)
	case "copiers", "ccopiers":
		copier := []string{b.peer, "relay"}
		if c.kind == "ccopiers" {
			copier = []string{b.crelay}
		}
		var argv []string
		for range 2*c.proxies + 1 {
			argv = append(argv, copier...)
		}
		return append(argv, agent...)
	}
	argv := []string{b.conductor, "agent"}
	switch c.kind {
	case "harness":
		argv = []string{b.peer, "conductor"}
	case "traced":
		argv = append(argv, "--trace", filepath.Join(b.dir, "trace.jsons"))
	}
	for range c.proxies {
		argv = append(argv, b.peer+" proxy")
	}
	if c.kind == "conductor" || c.kind == "traced" {
		// The agent is no subject of the tricks the conductor passes on to
		// its components: it waits as it does in every other chain.
		return append(argv, trick.Env+"= "+b.peer+" agent")
	}
	return append(argv, b.peer+" agent")
}

// client runs bench/peer client for one scenario against c and decodes its
// JSON result into res.
func (b *bench) client(c chain, res any, env []string, args ...string) error {
	argv := append([]string{"client"}, args...)
	argv = append(append(argv, "--"), b.argv(c)...)
	return b.peerCmd(res, env, argv...)
}

func (b *bench) peerCmd(res any, env []string, args ...string) error {
	cmd := exec.Command(b.peer, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("peer %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	if err := json.Unmarshal(stdout.Bytes(), res); err != nil {
		return fmt.Errorf("peer %s: bad result %q: %w", strings.Join(args, " "), stdout.Bytes(), err)
	}
	return nil
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
