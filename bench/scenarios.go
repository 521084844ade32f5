package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// The results of bench/peer, as it prints them.

type throughput struct {
	Prompts        int     `json:"prompts"`
	Updates        int     `json:"updates"`
	Seconds        float64 `json:"seconds"`
	UpdatesPerSec  float64 `json:"updatesPerSec"`
	PromptsPerSec  float64 `json:"promptsPerSec"`
	MessagesPerSec float64 `json:"messagesPerSec"`
}

type streamResult struct {
	LatencyMedianNs int64      `json:"latencyMedianNs"`
	LatencyP99Ns    int64      `json:"latencyP99Ns"`
	TP3             throughput `json:"tp3"`
	TP100           throughput `json:"tp100"`
	LatencyCPUNs    float64    `json:"latencyCpuNs"`
	LatencySwitches float64    `json:"latencySwitches"`
	TP100CPUNs      float64    `json:"tp100CpuNs"`
}

type bigResult struct {
	PayloadBytes int     `json:"payloadBytes"`
	Seconds      float64 `json:"seconds"`
	HWMBefore    int64   `json:"hwmBefore"`
	HWM          int64   `json:"hwm"`
}

type concurrentResult struct {
	Sessions   int        `json:"sessions"`
	Errors     int        `json:"errors"`
	FirstError string     `json:"firstError"`
	Throughput throughput `json:"throughput"`
}

type startupResult struct {
	InitNs  int64 `json:"initNs"`
	IdleRSS int64 `json:"idleRss"`
	IdleHWM int64 `json:"idleHwm"`
}

// What the runner makes of them.

type sweepRow struct {
	chain                    chain
	lat50, lat99, tp3, tp100 float64 // medians over the rounds: ns, ns, updates/s, updates/s
	// The process between editor and agent (the agent itself when direct):
	// CPU ns and voluntary context switches per round trip, CPU ns per
	// update at 100 per prompt; medians over the rounds.
	cpuRT, switchesRT, cpuUpdate float64
}

type bigRow struct {
	chain   chain
	seconds float64 // median
	hwm     int64   // the highest peak over the runs
}

type concRow struct {
	chain         chain
	errors        int
	firstError    string
	promptsPerSec float64 // median
	updatesPerSec float64
}

type startRow struct {
	name    string
	initNs  int64
	idleRSS int64 // 0 where not measured
}

type benchRow struct {
	name          string // e.g. small/notify
	nsPerOp, mbps float64
	bytes, allocs int64
	instructions  float64 // per op, under cachegrind; 0 where not counted
}

type results struct {
	sweep []sweepRow
	// The sweep's and the sdk scenario's rows of each round alone, in the
	// order of the rounds, for judgedRoundTargets.
	sweepRounds [][]sweepRow
	sdkRounds   [][]sdkRow
	big         []bigRow
	conc        []concRow
	start       []startRow
	relay       []benchRow
	sdk         []sdkRow // nil without Node.js
	trick       trickRows
}

func medianF(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// sweep runs the stream scenario through every chain, in interleaved
// rounds so that a change in the machine's load touches all chains alike.
// It returns the medians over the rounds, and each round's rows alone.
func (b *bench) sweep() (rows []sweepRow, rounds [][]sweepRow, err error) {
	chains := []chain{direct, relay}
	if b.crelay != "" {
		chains = append(chains, crelay)
	}
	chains = append(chains, conductorChain(0), traced, conductorChain(1), conductorChain(3), conductorChain(10),
		copierChain(1), copierChain(3), copierChain(10))
	if b.crelay != "" {
		chains = append(chains, cCopierChain(1), cCopierChain(3), cCopierChain(10))
	}
	runs := make([][]streamResult, len(chains))
	p := b.plan
	for round := range p.rounds {
		for i, c := range chains {
			progress("round %d/%d: stream scenario, %s", round+1, p.rounds, c.name)
			var res streamResult
			if err := b.client(c, &res, nil, "-scenario", "stream",
				"-warmup", strconv.Itoa(p.warmup), "-latency", strconv.Itoa(p.latency),
				"-tp3", strconv.Itoa(p.tp3), "-tp100", strconv.Itoa(p.tp100)); err != nil {
				return nil, nil, err
			}
			progress("  median %s, p99 %s; %s updates/s at 3 per prompt, %s at 100", fmtNs(float64(res.LatencyMedianNs)),
				fmtNs(float64(res.LatencyP99Ns)), fmtRate(res.TP3.UpdatesPerSec), fmtRate(res.TP100.UpdatesPerSec))
			runs[i] = append(runs[i], res)
		}
	}
	rows, rounds = summarize(chains, runs, sweepOf)
	return rows, rounds, nil
}

// summarize makes, from runs (each chain's results, one a round, in the
// order of the rounds), the rows of the medians over the rounds, and each
// round's rows alone; of makes a row from a chain's results.
func summarize[C, R, Row any](chains []C, runs [][]R, of func(C, []R) Row) (rows []Row, rounds [][]Row) {
	for i, c := range chains {
		rows = append(rows, of(c, runs[i]))
	}
	for round := range len(runs[0]) {
		one := make([]Row, len(chains))
		for i, c := range chains {
			one[i] = of(c, runs[i][round:round+1])
		}
		rounds = append(rounds, one)
	}
	return rows, rounds
}

// sweepOf makes the medians of runs.
func sweepOf(c chain, runs []streamResult) sweepRow {
	var l50, l99, t3, t100, cpu, sw, cpuU []float64
	for _, r := range runs {
		l50 = append(l50, float64(r.LatencyMedianNs))
		l99 = append(l99, float64(r.LatencyP99Ns))
		t3 = append(t3, r.TP3.UpdatesPerSec)
		t100 = append(t100, r.TP100.UpdatesPerSec)
		cpu = append(cpu, r.LatencyCPUNs)
		sw = append(sw, r.LatencySwitches)
		cpuU = append(cpuU, r.TP100CPUNs)
	}
	return sweepRow{chain: c, lat50: medianF(l50), lat99: medianF(l99), tp3: medianF(t3), tp100: medianF(t100),
		cpuRT: medianF(cpu), switchesRT: medianF(sw), cpuUpdate: medianF(cpuU)}
}

// big sends one prompt of plan.bigBytes directly and through 3 proxies.
func (b *bench) big() ([]bigRow, error) {
	var rows []bigRow
	for _, c := range []chain{direct, conductorChain(3)} {
		row := bigRow{chain: c}
		var secs []float64
		for i := range b.plan.bigRuns {
			progress("%d MiB prompt %d/%d, %s", b.plan.bigBytes>>20, i+1, b.plan.bigRuns, c.name)
			var res bigResult
			if err := b.client(c, &res, nil, "-scenario", "big", "-bytes", strconv.Itoa(b.plan.bigBytes)); err != nil {
				return nil, err
			}
			secs = append(secs, res.Seconds)
			row.hwm = max(row.hwm, res.HWM)
		}
		row.seconds = medianF(secs)
		rows = append(rows, row)
	}
	return rows, nil
}

// concurrent runs many sessions at once, directly and through 2 proxies.
func (b *bench) concurrent() ([]concRow, error) {
	var rows []concRow
	p := b.plan
	for _, c := range []chain{direct, conductorChain(2)} {
		row := concRow{chain: c}
		var pps, ups []float64
		for i := range p.concRuns {
			progress("%d sessions x %d prompts %d/%d, %s", p.sessions, p.prompts, i+1, p.concRuns, c.name)
			var res concurrentResult
			if err := b.client(c, &res, nil, "-scenario", "concurrent", "-sessions", strconv.Itoa(p.sessions),
				"-prompts", strconv.Itoa(p.prompts), "-updates", strconv.Itoa(p.concUpdate)); err != nil {
				return nil, err
			}
			row.errors += res.Errors
			if row.firstError == "" {
				row.firstError = res.FirstError
			}
			pps = append(pps, res.Throughput.PromptsPerSec)
			ups = append(ups, res.Throughput.UpdatesPerSec)
		}
		row.promptsPerSec, row.updatesPerSec = medianF(pps), medianF(ups)
		rows = append(rows, row)
	}
	return rows, nil
}

// startup times launch to initialize answer: the agent alone, the three
// proxies and the agent started together without a conductor, and the
// conductor with 0 and with 3 proxies, and with 3 and no watchdog, in
// interleaved rounds (one launch of each per round), so that load that
// drifts during the scenario weighs on each alike. Each figure is the
// median over the rounds.
func (b *bench) startup() ([]startRow, error) {
	type series struct {
		c          chain
		name       string
		disable    string
		parts      bool
		inits, rss []float64
	}
	proxy := b.peer + " proxy"
	all := []*series{
		{c: direct, name: direct.name},
		{name: partsName, parts: true},
		{c: conductorChain(0), name: conductorChain(0).name},
		{c: conductorChain(3), name: conductorChain(3).name},
		{c: conductorChain(3), name: unsupervised.name, disable: trick.Supervisor},
	}
	for i := range b.plan.startRepeat {
		progress("startup round %d/%d", i+1, b.plan.startRepeat)
		for _, s := range all {
			var res startupResult
			var err error
			if s.parts {
				err = b.peerCmd(&res, nil, "startparts", "-repeat", "1", "--", proxy, proxy, proxy, b.peer+" agent")
			} else {
				err = b.client(s.c, &res, nil, "-scenario", "startup", "-disable", s.disable, "-repeat", "1", "-settle", "200ms")
			}
			if err != nil {
				return nil, err
			}
			s.inits = append(s.inits, float64(res.InitNs))
			s.rss = append(s.rss, float64(res.IdleRSS))
		}
	}
	var rows []startRow
	for _, s := range all {
		row := startRow{name: s.name, initNs: int64(medianF(s.inits))}
		if !s.parts && s.disable == "" {
			row.idleRSS = int64(medianF(s.rss))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// startupOnly runs the startup scenario alone (-only startup) and prints
// its rows and its target.
func (b *bench) startupOnly(out string) error {
	rows, err := b.startup()
	if err != nil {
		return err
	}
	r := results{start: rows}
	var w strings.Builder
	fmt.Fprintf(&w, "### Startup (launch → initialize answer, median of %d interleaved rounds)\n\n| chain | time |\n|---|---|\n", b.plan.startRepeat)
	for _, s := range rows {
		fmt.Fprintf(&w, "| %s | %s |\n", s.name, fmtNs(float64(s.initNs)))
	}
	own := r.conductorStartup()
	fmt.Fprintf(&w, "| conductor's own share, 3 proxies (conductor − components) | %s |\n", fmtNs(own))
	fmt.Fprintf(&w, "| the same without the chain's watchdog | %s |\n", fmtNs(r.startRow(unsupervised.name)-r.startRow(partsName)))
	fmt.Fprintf(&w, "\n| target | measured | result |\n|---|---|---|\n| start-up: the conductor's own share of a 3-proxy chain ≤ 20 ms | %s | %s |\n", fmtNs(own), passMiss(own <= 20e6))
	return emit(w.String(), out)
}

// unsupervised is the 3-proxy chain with no watchdog
// (ACP_BENCH_DISABLE=supervisor): what the chain's watchdog costs at start-up.
var unsupervised = chain{name: "conductor, 3 proxies, no watchdog", kind: "conductor", proxies: 3}

const partsName = "components of the 3-proxy chain, started together"

var benchLine = regexp.MustCompile(`^BenchmarkRelay/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?(?:\s+[\d.]+ \S+/op)*?\s+(\d+) B/op\s+(\d+) allocs/op`)

// goBench runs the in-process relay benchmarks.
func (b *bench) goBench() ([]benchRow, error) {
	progress("go test -run '^$' -bench BenchmarkRelay -benchmem -benchtime %s ./conductor", b.plan.benchtime)
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "BenchmarkRelay", "-benchmem", "-benchtime", b.plan.benchtime, "./conductor")
	cmd.Dir = b.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	var rows []benchRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		r := benchRow{name: m[1]}
		r.nsPerOp, _ = strconv.ParseFloat(m[2], 64)
		r.mbps, _ = strconv.ParseFloat(m[3], 64)
		r.bytes, _ = strconv.ParseInt(m[4], 10, 64)
		r.allocs, _ = strconv.ParseInt(m[5], 10, 64)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no BenchmarkRelay results in:\n%s", out)
	}
	return rows, nil
}
