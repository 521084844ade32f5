package trace

import (
	"fmt"
	"os"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/browser"
)

// TestMain makes sure the viewer's browser tests have a browser: Debian's
// chromium is installed when it is missing and the tests run as root.
// When there is none, the browser tests skip, and say so here, loudly,
// where a run without -v shows it too.
func TestMain(m *testing.M) {
	if _, err := browser.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "\n*** SKIPPING the trace viewer's browser tests: %v\n\n", err)
	}
	os.Exit(m.Run())
}
