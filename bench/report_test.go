package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRoundTally: each target judged on the sweep is counted in the rounds
// it passes in on that round's figures alone, whatever the medians say,
// and the rows over the rounds are the medians of the rounds' results.
func TestRoundTally(t *testing.T) {
	chains := []chain{direct, relay, crelay, conductorChain(0), conductorChain(1), copierChain(1), cCopierChain(1)}
	// Latency (µs) of each chain in each of three rounds: the 0-proxy
	// conductor adds 10 over direct, as the Go copier does, in rounds 0 and
	// 2, and 20 in round 1; the hop (1 proxy against 0) is 50 against a
	// limit of 20 in every round; 3 copiers in series add 44 over the
	// one copier in rounds 0 and 1, so the hop is within 1.25 × that
	// floor, and 30 in round 2, where it is not; the C copier adds 11 over
	// direct, and 3 C copiers add 24 over it in each round.
	lat := [][]float64{
		{20, 20, 20},
		{30, 30, 30},
		{31, 31, 31},
		{30, 40, 30},
		{80, 90, 80},
		{74, 74, 60},
		{55, 55, 55},
	}
	// Updates/s: the C copier's and the 0-proxy conductor's; the
	// conductor keeps up in rounds 0 and 1 only.
	tp := map[string][]float64{crelay.name: {100, 100, 200}, conductorChain(0).name: {100, 100, 100}}
	runs := make([][]streamResult, len(chains))
	for i, c := range chains {
		for round, us := range lat[i] {
			res := streamResult{LatencyMedianNs: int64(us * 1e3)}
			if v := tp[c.name]; v != nil {
				res.TP100.UpdatesPerSec = v[round]
			}
			runs[i] = append(runs[i], res)
		}
	}
	rows, rounds := summarize(chains, runs, sweepOf)
	if len(rounds) != 3 || rows[3].lat50 != 30e3 || rows[2].tp100 != 100 {
		t.Fatalf("%d rounds, 0-proxy median %v ns, C copier %v updates/s: want 3, 30000 and 100", len(rounds), rows[3].lat50, rows[2].tp100)
	}
	r := results{sweep: rows, sweepRounds: rounds}
	if got, want := r.hops("copiers"), []hop{{proxies: 1, lat50: 44e3}}; !slices.Equal(got, want) {
		t.Errorf("copiers' hops: got %v, want %v", got, want)
	}
	if got, want := r.hops("ccopiers"), []hop{{proxies: 1, lat50: 24e3}}; !slices.Equal(got, want) {
		t.Errorf("C copiers' hops: got %v, want %v", got, want)
	}
	var names []string
	var ok []bool
	for _, tg := range r.roundTargets() {
		names, ok = append(names, tg.name), append(ok, tg.ok)
		if strings.HasPrefix(tg.name, "each added proxy-library passthrough") && !strings.HasSuffix(tg.measured,
			"Go copiers making a proxy's crossings: 44.0 µs (1→3); C copiers making a proxy's crossings: 24.0 µs (1→3)") {
			t.Errorf("the hop limit's figures do not end with both floors: %s", tg.measured)
		}
	}
	wantNames := []string{
		"0 proxies: added median latency ≤ 1.25 × the Go copier's",
		"0 proxies: added median latency ≤ 2 × the C copier's",
		"0 proxies: updates/s at 100 per prompt ≥ 0.95 × the C copier's",
		"each added proxy-library passthrough adds ≤ 2 × the Go copier's added latency",
		"each proxy-library hop ≤ 1.25 × the same crossings through Go copiers (the hop limit against a measured floor; not issue 16's)",
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("targets:\n got %q\nwant %q", names, wantNames)
	}
	if want := []bool{true, true, true, false, true}; !slices.Equal(ok, want) {
		t.Errorf("on the medians: got %v, want %v", ok, want)
	}
	if got, want := r.roundTally(), []string{"2 of 3", "3 of 3", "2 of 3", "0 of 3", "2 of 3"}; !slices.Equal(got, want) {
		t.Errorf("tally: got %q, want %q", got, want)
	}
}
