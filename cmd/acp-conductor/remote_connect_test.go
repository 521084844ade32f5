package main

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/config"
)

// TestRemoteClientTrustsExtraCAs: with a PEM file of authorities, a
// remote component trusts a server the system does not, on every platform;
// a file that cannot be read or holds no certificate is an error naming
// the variable.
func TestRemoteClientTrustsExtraCAs(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("the system already trusts the test server")
	}
	c, err := remoteClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("with %s: %v", config.EnvExtraCACerts, err)
	}
	resp.Body.Close()

	if c, err := remoteClient(""); c != nil || err != nil {
		t.Errorf(`remoteClient("") = %v, %v; want Dial's default`, c, err)
	}
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o644)
	for _, file := range []string{filepath.Join(dir, "missing.pem"), junk} {
		if _, err := remoteClient(file); err == nil || !strings.Contains(err.Error(), config.EnvExtraCACerts) {
			t.Errorf("remoteClient(%s): %v, want an error naming %s", file, err, config.EnvExtraCACerts)
		}
	}
}
