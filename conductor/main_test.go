package conductor

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if role := os.Getenv("ACP_TEST_ROLE"); role != "" {
		runFake(role)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
