package conductor

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/tally"
)

// TestStrayCountLoggedWhileRunning: past the first few stray lines, the
// count is logged when one comes at least tally.Every after the last
// line logged, not only as the peer ends; and at the end only if some
// came after it.
func TestStrayCountLoggedWhileRunning(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	p := newPeer("chatty", 1, nil, zap.New(core))
	now := time.Unix(1000, 0)
	p.strays.Now = func() time.Time { return now }
	stray := func() { p.stray([]byte("chatter"), fmt.Errorf("not JSON")) }

	for range strayLogged + 3 {
		stray()
	}
	if n := logs.Len(); n != strayLogged {
		t.Fatalf("logged %d lines for %d stray lines within tally.Every, want %d", n, strayLogged+3, strayLogged)
	}
	now = now.Add(tally.Every)
	stray() // the 9th
	stray()
	counts := logs.FilterMessage("dropped output that is not JSON-RPC, so far").All()
	if len(counts) != 1 || counts[0].ContextMap()["count"] != int64(strayLogged+4) {
		t.Fatalf("counts logged while running: %v, want one of %d", counts, strayLogged+4)
	}
	p.logDropped()
	all := logs.FilterMessage("dropped output that is not JSON-RPC, in all").All()
	if len(all) != 1 || all[0].ContextMap()["count"] != int64(strayLogged+5) {
		t.Fatalf("counts logged at the end: %v, want one of %d", all, strayLogged+5)
	}

	// Nothing came after the last count: the end has nothing to add.
	core, logs = observer.New(zap.DebugLevel)
	p = newPeer("chatty", 1, nil, zap.New(core))
	p.strays.Now = func() time.Time { return now }
	for range strayLogged + 1 {
		stray()
	}
	now = now.Add(tally.Every)
	stray()
	p.logDropped()
	if n := logs.FilterMessageSnippet("in all").Len(); n != 0 {
		t.Errorf("logged %d counts at the end, want none: the last count was up to date", n)
	}
}

// TestDropCountLoggedWhileRunning is TestStrayCountLoggedWhileRunning
// for messages dropped for a closed peer, of which the first is logged.
func TestDropCountLoggedWhileRunning(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	p := newPeer("p", 1, nil, zap.New(core))
	now := time.Unix(1000, 0)
	p.drops.Now = func() time.Time { return now }
	for range 10 {
		p.dropped()
	}
	now = now.Add(tally.Every)
	p.dropped()
	now = now.Add(tally.Every - 1)
	p.dropped()
	counts := logs.FilterMessage("dropped messages for closed peer, so far").All()
	if len(counts) != 1 || counts[0].ContextMap()["count"] != int64(11) {
		t.Fatalf("counts logged while running: %v, want one of 11", counts)
	}
	p.logDropped()
	end := logs.FilterMessage("dropped messages for closed peer").All()
	if len(end) != 1 || end[0].ContextMap()["count"] != int64(12) {
		t.Fatalf("counts logged at the end: %v, want one of 12", end)
	}
	if n := logs.Len(); n != 3 {
		t.Errorf("logged %d lines for 12 drops, want 3: the first, a count while running, the end", n)
	}
}
