package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The sdk scenario puts the official ACP TypeScript SDK at both ends (the
// editor is bench/node/client.mjs, the agent bench/node/agent.mjs) and
// compares, in interleaved rounds, what stands between them: nothing, the
// two byte copiers, this conductor, and @thinkwell/conductor, the
// TypeScript conductor users would otherwise pick. Both conductors run the
// same Node passthrough proxy (bench/node/passthrough.mjs); this one also
// runs the proxy-library passthrough of bench/peer.

// sdkResult is what bench/node/client.mjs prints.
type sdkResult struct {
	LatencyMedianNs int64      `json:"latencyMedianNs"`
	LatencyP99Ns    int64      `json:"latencyP99Ns"`
	TP100           throughput `json:"tp100"`
	Errors          int        `json:"errors"`
	FirstError      string     `json:"firstError"`
}

// An sdkChain is one way of connecting the SDK editor to the SDK agent.
type sdkChain struct {
	name    string
	kind    string // direct, relay, crelay, conductor, thinkwell
	proxies int
	lib     bool // proxy-library passthroughs (bench/peer proxy) instead of the Node one
}

type sdkRow struct {
	chain        sdkChain
	lat50, tp100 float64 // medians over the rounds
	errors       int
	firstError   string
}

// nodeDir is bench/node, with its packages installed, or "" (and a note on
// stderr) when this machine has no Node.js.
func (b *bench) nodeDir() string {
	dir := filepath.Join(b.root, "bench", "node")
	npm, err := exec.LookPath("npm")
	if err != nil {
		progress("no npm: the TypeScript SDK and @thinkwell/conductor scenario is left out")
		return ""
	}
	if _, err := exec.LookPath("node"); err != nil {
		progress("no node: the TypeScript SDK and @thinkwell/conductor scenario is left out")
		return ""
	}
	lock, err1 := os.Stat(filepath.Join(dir, "package-lock.json"))
	inst, err2 := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err1 == nil && err2 == nil && !inst.ModTime().Before(lock.ModTime()) {
		return dir
	}
	progress("npm ci in bench/node")
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		progress("npm ci in bench/node failed, so the TypeScript scenario is left out: %v\n%s", err, out)
		return ""
	}
	return dir
}

func (b *bench) sdkArgv(dir string, c sdkChain) []string {
	node := func(script string) string { return "node " + filepath.Join(dir, script) }
	agent := []string{"node", filepath.Join(dir, "agent.mjs")}
	proxy := node("passthrough.mjs")
	if c.lib {
		proxy = b.peer + " proxy"
	}
	var argv []string
	switch c.kind {
	case "direct":
		return agent
	case "relay":
		return append([]string{b.peer, "relay"}, agent...)
	case "crelay":
		return append([]string{b.crelay}, agent...)
	case "conductor":
		argv = []string{b.conductor, "agent"}
	case "thinkwell":
		argv = []string{"node", filepath.Join(dir, "thinkwell.mjs")}
	}
	for range c.proxies {
		argv = append(argv, proxy)
	}
	return append(argv, node("agent.mjs"))
}

func sdkChains(haveC bool) []sdkChain {
	cs := []sdkChain{{name: "direct (no conductor)", kind: "direct"}, {name: "byte copier (Go)", kind: "relay"}}
	if haveC {
		cs = append(cs, sdkChain{name: "byte copier (C)", kind: "crelay"})
	}
	for _, n := range []int{0, 1, 3} {
		cs = append(cs, sdkChain{name: fmt.Sprintf("acp-conductor, %d Node proxies", n), kind: "conductor", proxies: n})
		if n > 0 {
			cs = append(cs, sdkChain{name: fmt.Sprintf("acp-conductor, %d proxy-library proxies", n), kind: "conductor", proxies: n, lib: true})
		}
		cs = append(cs, sdkChain{name: fmt.Sprintf("@thinkwell/conductor, %d Node proxies", n), kind: "thinkwell", proxies: n})
	}
	return cs
}

// sdk runs the scenario; nil without Node.js. It returns the medians over
// the rounds, and each round's rows alone.
func (b *bench) sdk() (rows []sdkRow, rounds [][]sdkRow, err error) {
	dir := b.nodeDir()
	if dir == "" {
		return nil, nil, nil
	}
	chains := sdkChains(b.crelay != "")
	p := b.plan
	runs := make([][]sdkResult, len(chains))
	for round := range p.rounds {
		for i, c := range chains {
			progress("round %d/%d: TypeScript SDK editor and agent, %s", round+1, p.rounds, c.name)
			args := []string{filepath.Join(dir, "client.mjs"), "--warmup", strconv.Itoa(p.sdkWarmup),
				"--latency", strconv.Itoa(p.sdkLatency), "--tp100", strconv.Itoa(p.sdkTP100), "--"}
			cmd := exec.Command("node", append(args, b.sdkArgv(dir, c)...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				return nil, nil, fmt.Errorf("sdk scenario, %s: %w\n%s", c.name, err, lastLines(stderr.String(), 20))
			}
			var res sdkResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				return nil, nil, fmt.Errorf("sdk scenario, %s: bad result %q: %w", c.name, stdout.Bytes(), err)
			}
			progress("  median %s; %s updates/s at 100 per prompt; %d errors", fmtNs(float64(res.LatencyMedianNs)),
				fmtRate(res.TP100.UpdatesPerSec), res.Errors)
			runs[i] = append(runs[i], res)
		}
	}
	rows, rounds = summarize(chains, runs, sdkRowOf)
	return rows, rounds, nil
}

// sdkRowOf makes the medians of runs.
func sdkRowOf(c sdkChain, runs []sdkResult) sdkRow {
	row := sdkRow{chain: c}
	var l50, t100 []float64
	for _, r := range runs {
		l50 = append(l50, float64(r.LatencyMedianNs))
		t100 = append(t100, r.TP100.UpdatesPerSec)
		row.errors += r.Errors
		if row.firstError == "" {
			row.firstError = r.FirstError
		}
	}
	row.lat50, row.tp100 = medianF(l50), medianF(t100)
	return row
}

// sdkOnly runs the sdk scenario alone (-only sdk) and prints its table and
// its targets.
func (b *bench) sdkOnly(out string) error {
	rows, rounds, err := b.sdk()
	if err != nil {
		return err
	}
	if rows == nil {
		return fmt.Errorf("-only sdk: the scenario needs node and npm")
	}
	r := results{sdk: rows, sdkRounds: rounds}
	var w strings.Builder
	r.sdkTable(&w, b.plan)
	fmt.Fprintf(&w, "\n### Targets\n\n%s\n\n", targetsHelp)
	writeTargets(&w, r.judgedRoundTargets())
	return emit(w.String(), out)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sdkFind returns the row of kind with n proxies (lib: library proxies).
func sdkFind(rows []sdkRow, kind string, n int, lib bool) (sdkRow, bool) {
	for _, r := range rows {
		if r.chain.kind == kind && r.chain.proxies == n && r.chain.lib == lib {
			return r, true
		}
	}
	return sdkRow{}, false
}

// sdkTable renders the sdk scenario: each chain's figures beside their ratio
// to direct, and the latency each adds over direct.
func (r *results) sdkTable(w *strings.Builder, p plan) {
	if r.sdk == nil {
		return
	}
	base := r.sdk[0]
	fmt.Fprintf(w, "\n### The official TypeScript SDK as editor and agent: acp-conductor and @thinkwell/conductor (medians over %d round(s))\n\n", p.rounds)
	fmt.Fprintf(w, "Latency: %d prompts with no updates, one at a time. Throughput: %d prompts with 100 updates each. "+
		"Node proxies are bench/node/passthrough.mjs under both conductors; proxy-library proxies are bench/peer's.\n\n", p.sdkLatency, p.sdkTP100)
	fmt.Fprintf(w, "| chain | median latency | added over direct | updates/s, 100 per prompt | errors |\n|---|---|---|---|---|\n")
	for _, s := range r.sdk {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d |\n", s.chain.name, cell(fmtNs(s.lat50), s.lat50, base.lat50),
			fmtNs(s.lat50-base.lat50), cell(fmtRate(s.tp100), s.tp100, base.tp100), s.errors)
	}
}

// thinkwellTargets: at 0, 1 and 3 proxies, at least 30 % less added latency
// than @thinkwell/conductor and more updates/s, with the same Node proxies,
// and with proxy-library proxies on our side.
func (r *results) thinkwellTargets() []target {
	if r.sdk == nil {
		return nil
	}
	base := r.sdk[0]
	var ts []target
	for _, n := range []int{0, 1, 3} {
		tw, ok := sdkFind(r.sdk, "thinkwell", n, false)
		if !ok {
			continue
		}
		for _, lib := range []bool{false, true} {
			if n == 0 && lib {
				continue
			}
			ours, ok := sdkFind(r.sdk, "conductor", n, lib)
			if !ok {
				continue
			}
			kind := "Node"
			if lib {
				kind = "proxy-library"
			}
			a, b := ours.lat50-base.lat50, tw.lat50-base.lat50
			ts = append(ts, target{name: fmt.Sprintf("%d proxies (ours %s): added latency ≤ 0.70 × @thinkwell/conductor's, and more updates/s", n, kind),
				measured: fmt.Sprintf("%s vs %s (×%.2f); %s vs %s", fmtNs(a), fmtNs(b), a/b, fmtRate(ours.tp100), fmtRate(tw.tp100)),
				ok:       a <= 0.70*b && ours.tp100 > tw.tp100})
		}
	}
	errs := 0
	for _, s := range r.sdk {
		errs += s.errors
	}
	ts = append(ts, target{name: "TypeScript SDK scenario: 0 errors on every chain", measured: fmt.Sprintf("%d errors", errs), ok: errs == 0, every: true})
	return ts
}
