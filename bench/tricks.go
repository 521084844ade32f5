package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// The platform tricks on the hot path (internal/trick) each stay only while
// this run shows what they buy in their own scenario, measured against the
// conductor with every trick on, in interleaved rounds: the relay's system
// calls, scheduling and copies (rawio, writev, pollable, spin, lend) with the
// stream scenario and 0 proxies; large messages (scratch, collect) with the
// 16 MiB prompt through 3 proxies.
var (
	streamTricks = []string{trick.RawIO, trick.Writev, trick.Pollable, trick.Spin, trick.Lend}
	bigTricks    = []string{trick.Scratch, trick.Collect}
)

// trickRows are the results: the baseline first ("" turns nothing off).
type trickRows struct {
	stream []sweepRow // chain.name is the trick turned off
	big    []bigRow
}

func (b *bench) tricks() (trickRows, error) {
	var out trickRows
	p := b.plan
	c0 := conductorChain(0)
	names := append([]string{""}, streamTricks...)
	runs := make([][]streamResult, len(names))
	for round := range p.rounds {
		for i, name := range names {
			progress("round %d/%d: stream scenario, 0 proxies, %s", round+1, p.rounds, trickLabel(name))
			var res streamResult
			if err := b.client(c0, &res, nil, "-scenario", "stream", "-disable", name,
				"-warmup", strconv.Itoa(p.warmup), "-latency", strconv.Itoa(p.latency),
				"-tp3", strconv.Itoa(p.tp3), "-tp100", strconv.Itoa(p.tp100)); err != nil {
				return out, err
			}
			runs[i] = append(runs[i], res)
		}
	}
	for i, name := range names {
		out.stream = append(out.stream, sweepOf(chain{name: name}, runs[i]))
	}

	c3 := conductorChain(3)
	names = append([]string{""}, bigTricks...)
	secs := make([][]float64, len(names))
	hwm := make([]int64, len(names))
	for i := range max(p.bigRuns, p.rounds) {
		for j, name := range names {
			progress("%d MiB prompt %d, 3 proxies, %s", p.bigBytes>>20, i+1, trickLabel(name))
			var res bigResult
			if err := b.client(c3, &res, nil, "-scenario", "big", "-disable", name, "-bytes", strconv.Itoa(p.bigBytes)); err != nil {
				return out, err
			}
			secs[j] = append(secs[j], res.Seconds)
			hwm[j] = max(hwm[j], res.HWM)
		}
	}
	for j, name := range names {
		out.big = append(out.big, bigRow{chain: chain{name: name}, seconds: medianF(secs[j]), hwm: hwm[j]})
	}
	return out, nil
}

// tricksOnly runs the tricks scenario alone (-only tricks) and prints its
// tables: what deciding whether a trick stays needs, without the rest.
func (b *bench) tricksOnly(out string) error {
	rows, err := b.tricks()
	if err != nil {
		return err
	}
	var w strings.Builder
	rows.table(&w, b.plan)
	return emit(w.String(), out)
}

func trickLabel(name string) string {
	if name == "" {
		return "every trick on"
	}
	return "without " + name
}

// trickTable prints what each trick buys: the figures with it off beside
// those of the same chain with every trick on.
func (t trickRows) table(w *strings.Builder, p plan) {
	if len(t.stream) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Platform tricks: each turned off (ACP_BENCH_DISABLE) against every trick on, same run (medians over %d round(s))\n\n", p.rounds)
	fmt.Fprintf(w, "A ratio above ×1.00 for latency or CPU, or below it for updates/s, is what the trick buys.\n\n")
	fmt.Fprintf(w, "| conductor, 0 proxies | median latency | updates/s, 100 per prompt | CPU / round trip | sleeps / round trip | CPU / update |\n|---|---|---|---|---|---|\n")
	on := t.stream[0]
	for _, s := range t.stream {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %s |\n", trickLabel(s.chain.name),
			cell(fmtNs(s.lat50), s.lat50, on.lat50), cell(fmtRate(s.tp100), s.tp100, on.tp100),
			cell(fmtNs(s.cpuRT), s.cpuRT, on.cpuRT), s.switchesRT, cell(fmtNs(s.cpuUpdate), s.cpuUpdate, on.cpuUpdate))
	}
	fmt.Fprintf(w, "\n| one %d MiB prompt, conductor + 3 proxies | elapsed | conductor peak RSS |\n|---|---|---|\n", p.bigBytes>>20)
	bon := t.big[0]
	for _, s := range t.big {
		fmt.Fprintf(w, "| %s | %s | %s |\n", trickLabel(s.chain.name),
			cell(fmtNs(s.seconds*1e9), s.seconds, bon.seconds), cell(fmtBytes(float64(s.hwm)), float64(s.hwm), float64(bon.hwm)))
	}
}
