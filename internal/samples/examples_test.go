package samples

import (
	"bytes"
	"os"
	"testing"
)

// TestPermissionPolicyScript checks that the embedded copy of the
// permission-policy example is the example as it is.
func TestPermissionPolicyScript(t *testing.T) {
	const original = "../../examples/proxies/permission-policy/permission_policy.py"
	want, err := os.ReadFile(original)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(PermissionPolicyScript, want) {
		t.Errorf("internal/samples/permission_policy.py is not a copy of %s: run go generate ./internal/samples", original[len("../../"):])
	}
}
