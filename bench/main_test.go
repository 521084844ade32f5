package main

import (
	"slices"
	"testing"
)

// TestCopierArgv: the copiers standing for n proxies are 2n+1 Go copiers,
// each launching the next, the last launching the agent: the crossings of
// the conductor (n+1) and of its proxies (n); and as many C copiers.
func TestCopierArgv(t *testing.T) {
	b := &bench{peer: "peer", crelay: "crelay"}
	for n, want := range map[int][]string{
		1: {"peer", "relay", "peer", "relay", "peer", "relay", "peer", "agent"},
		3: {"peer", "relay", "peer", "relay", "peer", "relay", "peer", "relay", "peer", "relay", "peer", "relay", "peer", "relay", "peer", "agent"},
	} {
		if got := b.argv(copierChain(n)); !slices.Equal(got, want) {
			t.Errorf("%d proxies' crossings: got %q, want %q", n, got, want)
		}
	}
	want := []string{"crelay", "crelay", "crelay", "peer", "agent"}
	if got := b.argv(cCopierChain(1)); !slices.Equal(got, want) {
		t.Errorf("1 proxy's crossings by C copiers: got %q, want %q", got, want)
	}
}

// TestTracedArgv: the traced chain is the conductor with no proxy, with
// --trace to a file of the run's directory, and the agent as in every
// conductor chain.
func TestTracedArgv(t *testing.T) {
	b := &bench{peer: "peer", conductor: "acp-conductor", dir: "/run"}
	plain, got := b.argv(conductorChain(0)), b.argv(traced)
	want := slices.Insert(slices.Clone(plain), 2, "--trace", "/run/trace.jsons")
	if !slices.Equal(got, want) {
		t.Errorf("traced: got %q, want %q", got, want)
	}
}
