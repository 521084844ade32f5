package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/transport"
)

func newRemoteConnectCmd() *cobra.Command {
	var pingInterval time.Duration
	var maxBytes int
	var level string
	cmd := &cobra.Command{
		Use:   config.RemoteCommand + " URL",
		Short: "Carry a remote component's stdio to its URL",
		Long: `Connect stdin and stdout to the ACP endpoint at URL, over WebSocket (or
Streamable HTTP when an http(s) server refuses the upgrade), one message per
line. The conductor runs it for a component given as a URL, with the
component's headers in ` + config.EnvRemoteHeaders + ` (and a URL with a query in
` + config.EnvRemoteURL + `, URL then being the same without it); it is not
meant to be run by hand. It exits 0 when stdin ends, and 1, naming the URL, when the
connection cannot be made or is lost: a WebSocket whose pong does not come
within --ping-interval is lost, so a server whose network vanished fails the
component in seconds rather than when TCP gives up. What the transport
reports along the way (--log-level debug: what a Streamable HTTP server sent
that carries no message) goes to stderr, which the conductor logs.`,
		Hidden: true, // a part of the conductor, not a tool
		Args:   wantArgs(1, 1, "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pingInterval < 0 {
				return fmt.Errorf("--ping-interval must be positive, or 0 for none, not %s", pingInterval)
			}
			if maxBytes < 1 {
				return fmt.Errorf("--max-message-bytes must be positive, not %d", maxBytes)
			}
			// Stderr, which the conductor logs line by line under the
			// component's name.
			log, closeLog, err := newLogger(config.Logging{Level: level, Format: "console"}, "", "")
			if err != nil {
				return err
			}
			defer closeLog()
			// What the conductor takes from a component: the limit, and an
			// envelope around a message within it.
			return runRemoteConnect(cmd.Context(), args[0], pingField(pingInterval), maxBytes+wire.EnvelopeOverhead, log)
		},
	}
	cmd.Flags().DurationVar(&pingInterval, "ping-interval", transport.DefaultPingInterval, "ping a WebSocket server this often and fail when no pong comes within it; 0 turns pings off")
	cmd.Flags().IntVar(&maxBytes, "max-message-bytes", wire.DefaultMaxMessageBytes, "the chain's largest message, which the connection must carry")
	cmd.Flags().StringVar(&level, "log-level", "info", "the least level logged to stderr: debug, info, warn or error (the chain's, which the conductor passes)")
	return cmd
}

// remoteClient returns the HTTP client that trusts the certificate
// authorities in caFile besides the system's, or nil (transport.Dial's
// default) if caFile is "".
func remoteClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvExtraCACerts, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // none to add to, on this platform
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in %s", config.EnvExtraCACerts, caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	jar, _ := cookiejar.New(nil)
	return &http.Client{Transport: tr, Jar: jar}, nil
}

// dialTimeout bounds connecting, so a black-holed host fails the component
// rather than hang the editor's initialize.
const dialTimeout = 30 * time.Second

func runRemoteConnect(ctx context.Context, url string, pingInterval time.Duration, maxBytes int, log *zap.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	if full, ok := os.LookupEnv(config.EnvRemoteURL); ok {
		url = full // argv has it without its query (see EnvRemoteURL)
		os.Unsetenv(config.EnvRemoteURL)
	}
	hdr := http.Header{}
	if s := os.Getenv(config.EnvRemoteHeaders); s != "" {
		var h map[string]string
		if err := json.Unmarshal([]byte(s), &h); err != nil {
			return fmt.Errorf("%s: %w", config.EnvRemoteHeaders, err)
		}
		for k, v := range h {
			hdr.Set(k, v)
		}
	}
	os.Unsetenv(config.EnvRemoteHeaders)
	client, err := remoteClient(os.Getenv(config.EnvExtraCACerts))
	if err != nil {
		return err
	}

	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, err := transport.Dial(dctx, url, transport.DialOptions{Header: hdr, PingInterval: pingInterval, HTTPClient: client, MaxMessageBytes: maxBytes, Logger: log})
	cancel()
	if err != nil {
		if refused, ok := refusedError(err); ok {
			return refused
		}
		return fmt.Errorf("connecting to %w", err) // the error starts with the URL
	}
	defer c.Close()

	lost := make(chan error, 1)
	go func() { // ends with the process
		out := bufio.NewWriterSize(os.Stdout, 64<<10)
		for {
			msg, err := c.Read(ctx)
			if err != nil {
				lost <- err
				return
			}
			out.Write(msg)
			out.WriteByte('\n')
			if err := out.Flush(); err != nil {
				lost <- fmt.Errorf("writing to the conductor: %w", err)
				return
			}
		}
	}()
	sent := make(chan error, 1)
	go func() { // ends with the process
		in := bufio.NewReaderSize(os.Stdin, 64<<10)
		for {
			line, err := in.ReadBytes('\n')
			if len(line) > 1 || (len(line) == 1 && line[0] != '\n') {
				if werr := c.Write(ctx, trimEOL(line)); werr != nil {
					sent <- werr
					return
				}
			}
			if err != nil {
				sent <- err
				return
			}
		}
	}()
	select {
	case err := <-sent:
		if errors.Is(err, io.EOF) {
			return nil // the conductor is done with the component
		}
		if refused, ok := refusedError(err); ok { // over Streamable HTTP, at initialize
			return refused
		}
		return fmt.Errorf("connection to %s lost: %w", redact(url), err)
	case err := <-lost:
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("connection to %s closed by the server", redact(url))
		}
		return fmt.Errorf("connection to %s lost: %w", redact(url), err)
	case <-ctx.Done():
		return nil
	}
}

// refusedError reports a server's refusal of the credentials in err, the
// line of stderr that the editor is shown (the conductor's error for the
// component carries it): plainly, with where the token is set, and whether
// it was. The token itself is never in it.
func refusedError(err error) (error, bool) {
	r, ok := errors.AsType[*transport.RefusedError](err)
	if !ok {
		return nil, false
	}
	hint := "set " + config.EnvRemoteToken + " or the component's headers"
	if !r.Token {
		hint = "no token was set: " + hint
	}
	return fmt.Errorf("connecting to %w; %s", r, hint), true
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// redact drops a URL's query, which may hold a token.
func redact(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '?' || s[i] == '#' {
			return s[:i]
		}
	}
	return s
}
