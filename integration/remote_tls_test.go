package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/transport"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost,
// and its key, as PEM files, and returns their paths and a pool that
// trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acp-conductor integration test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLS: serve with --tls-cert and --tls-key, reached over wss://
// and https:// by the official TS SDK editor (trusting the certificate
// through NODE_EXTRA_CA_CERTS), by a local conductor whose agent is the
// wss:// URL (trusting it through SSL_CERT_FILE, which Go reads on Linux,
// and through ACP_CONDUCTOR_EXTRA_CA_CERTS, which the conductor reads),
// and by a Go Streamable HTTP client, which negotiates HTTP/2 by ALPN. A
// client that does not trust the certificate gets no connection.
func TestServeTLS(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	cert, key, pool := selfSigned(t)
	s := startServeWith(t, []string{"--tls-cert", cert, "--tls-key", key}, goProxyCmd("remote-proxy"), agentCmd("agent"))
	if !strings.HasPrefix(s.url, "wss://") {
		t.Fatalf("serve over TLS logged %s, want a wss:// URL", s.url)
	}
	opened := func() int { return strings.Count(s.log.String(), "connection opened") }
	ctx := testContext(t, 180*time.Second)

	// The SDK editor over both profiles.
	for _, profile := range []string{"ws", "http"} {
		url := s.url
		if profile == "http" {
			url = s.httpURL()
		}
		cfg := remoteConfig(conversationConfig(t, "tls-"+profile), url, profile)
		cfg.env = []string{"NODE_EXTRA_CA_CERTS=" + cert}
		checkConversation(t, runClient(t, ctx, cfg, nil), cfg)

		before := opened()
		untrusting := remoteConfig(clientConfig{Prompts: []string{"x"}}, url, profile)
		sum := startClient(t, ctx, untrusting, nil).wait(t)
		if len(sum.Failures) == 0 {
			t.Errorf("%s: an editor that does not trust the certificate succeeded", profile)
		}
		if opened() != before {
			t.Errorf("%s: an editor that does not trust the certificate got a connection", profile)
		}
	}

	// A local conductor whose agent is the wss:// URL, trusting the
	// certificate as Go does on Linux, and as the conductor does anywhere.
	for _, trust := range []string{"SSL_CERT_FILE", "ACP_CONDUCTOR_EXTRA_CA_CERTS"} {
		cfg := conversationConfig(t, "tls-nested")
		withMarker(t, &cfg)
		cfg.ChildEnv["ACP_CONDUCTOR_REMOTE_TOKEN"] = serveToken
		cfg.ChildEnv[trust] = cert
		sum := runClient(t, ctx, cfg, agentModeArgs(goProxyCmd("local-proxy"), s.url))
		checkConversation(t, sum, cfg)
		if sum.exitCode() != 0 {
			t.Errorf("%s: local conductor exit: %s", trust, sum.exitString())
		}
	}
	// Without the certificate it fails, saying why.
	cfg := clientConfig{Prompts: []string{"x"}}
	withMarker(t, &cfg)
	cfg.ChildEnv["ACP_CONDUCTOR_REMOTE_TOKEN"] = serveToken
	rc := startClient(t, ctx, cfg, agentModeArgs(s.url))
	rc.wait(t)
	if out := rc.stderr.String(); !strings.Contains(out, "certificate") || !strings.Contains(out, s.url) {
		t.Errorf("a conductor that does not trust the certificate: no error naming the URL and the certificate:\n%s", out)
	}

	// Streamable HTTP from Go: HTTP/2 by ALPN.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	jar, _ := cookiejar.New(nil)
	if err := converseRaw(ctx, s.httpURL(), transport.DialOptions{StreamableHTTP: true, HTTPClient: &http.Client{Transport: tr, Jar: jar}}, 2); err != nil {
		t.Errorf("Streamable HTTP over TLS from Go: %v", err)
	}
	tr.CloseIdleConnections()
	s.waitNoChains(t)
	protos := regexp.MustCompile(`"transport": "(\w+)".*"proto": "([^"]+)".*"user_agent": "([^"]*)"`).FindAllStringSubmatch(s.log.String(), -1)
	var h2 bool
	for _, p := range protos {
		t.Logf("%s over %s from %q", p[1], p[2], p[3])
		if p[1] == "http" && p[2] == "HTTP/2.0" && strings.HasPrefix(p[3], "Go-http-client/2") {
			h2 = true
		}
		if p[1] == "websocket" && p[2] != "HTTP/1.1" {
			t.Errorf("a WebSocket over %s", p[2])
		}
	}
	if !h2 {
		t.Errorf("no Streamable HTTP connection over HTTP/2 among:\n%s", s.log)
	}
}
