package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/supervisor"
	"github.com/acp-conductor/acp-conductor/transport"
)

// envToken names the variable serve reads its token from when no
// --token-file is given. serve removes it from its environment, so that no
// component inherits it.
const envToken = config.EnvServeToken

// serveMaxMessageBytes is serve's max_message_bytes unless a layer sets
// one: the TypeScript SDK's HTTP client closes its whole transport on a
// message over its limit, where the conductor drops only that message
// and answers its request with an error naming the limit. A component's
// line may run an envelope's slack past the limit, and the client's id
// replaces the hop's, hence the margin below the SDK's limit.
const serveMaxMessageBytes = transport.SDKMaxMessageBytes - 2*wire.EnvelopeOverhead

type serveFlags struct {
	listen         string
	path           string
	tokenFile      string
	insecureNoAuth bool
	maxConns       int
	maxTCPConns    int
	tlsCert        string
	tlsKey         string
	allowHosts     []string
	proxy          bool
	idleTimeout    time.Duration
	pingInterval   time.Duration
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [flags] [--config FILE | [--] [PROXY...] AGENT]",
		Short: "Serve a chain over the network (WebSocket and Streamable HTTP)",
		Long: `Serve the chain to remote editors at the /acp endpoint of ACP's Streamable
HTTP and WebSocket transport. Every ACP connection gets a chain of its own,
started by its initialize and stopped, as "agent" stops one, when the
connection ends: WebSocket close, DELETE, or an HTTP connection left idle
(no request and no open stream) for --idle-timeout, which is how a client
that vanished without DELETE is noticed. A WebSocket is pinged every
--ping-interval and ended when no pong comes within the interval, which is
how a client whose network vanished (no close, no reset) is noticed, rather
than when TCP gives up a quarter of an hour later; and any connection whose
sent data stays unacknowledged for twice the interval ends (Linux), which is
how a Streamable HTTP client's lost network is. A TCP connection kept
alive with no request in progress is closed after 2 minutes, or
--idle-timeout if that is shorter; an open stream or a WebSocket is never
cut by that. The chain is given as for
"agent", or with --proxy as for "proxy": a chain of proxies that a parent
conductor reaches as one of its own, by URL.

Unless --max-message-bytes, its variable or the chain file sets it, the
longest message is 32 MiB less 8 KiB, not 64 MiB: the TypeScript SDK's
HTTP client closes its whole connection on a message over 32 MiB, while
the conductor drops only the message, answering its request, or the call
it answered, with an error that names the limit.

Every request must carry "Authorization: Bearer TOKEN". The token is read from
--token-file or the ` + envToken + ` environment variable, never from the
command line, and never logged; it is compared in constant time. Without a
token serve refuses to start, unless --insecure-no-auth is given and the
address is a loopback one. Host and Origin are checked against DNS rebinding:
on a loopback address both must name this machine (or an --allow-host).

The address is loopback by default. A non-loopback address needs
--tls-cert and --tls-key (HTTP/2 over TLS); on loopback, plain HTTP serves
HTTP/1.1 and cleartext HTTP/2 (h2c). Who connected, over which HTTP version,
and when each connection ended is logged. With --trace, one trace holds
every connection's chain, each event marked with its "connection".

Settings are layered as for "agent", but serve does not spin: it takes no
--spin, and a spin that a chain file or ACP_CONDUCTOR_SPIN sets (for
"agent" or "proxy", which do) is ignored, as serve logs at start.`,
		Example: `  # A chain on a dev box, reached through an SSH tunnel to its loopback port:
  ACP_CONDUCTOR_TOKEN=$(cat ~/.acp-token) acp-conductor serve --listen 127.0.0.1:8765 \
      -- "ctx-proxy --flag x" "npx -y some-agent --acp"

  # Over TLS on every interface, the chain from a file:
  acp-conductor serve --listen :8443 --tls-cert cert.pem --tls-key key.pem \
      --token-file /etc/acp/token --config chain.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd, f, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8765", "address to listen on, HOST:PORT")
	fs.StringVar(&f.path, "path", "/acp", "the endpoint's path")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file (else $"+envToken+")")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "serve without a token (loopback addresses only)")
	fs.IntVar(&f.maxConns, "max-connections", 16, "most connections (chains) at once; 0 means no bound")
	fs.IntVar(&f.maxTCPConns, "max-tcp-connections", 0, "most TCP connections open at once, beyond which new ones wait to be accepted; 0 means enough for every stream of --max-connections (or of 16, if that is 0)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (PEM)")
	fs.BoolVar(&f.proxy, "proxy", false, "serve a proxy-mode chain, for a parent conductor that lists this URL among its proxies")
	fs.StringSliceVar(&f.allowHosts, "allow-host", nil, "further host names accepted in Host and Origin (repeatable)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", transport.DefaultIdleTimeout, "end a Streamable HTTP connection with no request and no open stream, or a WebSocket that has sent no message, for this long; a TCP connection kept alive with no request is closed after this or 2m, whichever is shorter")
	fs.DurationVar(&f.pingInterval, "ping-interval", transport.DefaultPingInterval, "ping a WebSocket client this often and end its connection when no pong comes within it; 0 turns pings off")
	addChainFlags(cmd, "spin") // serve does not spin: see runServe
	return cmd
}

// readToken returns the token from file or the environment, and removes it
// from the environment.
func readToken(file string) (string, error) {
	env := os.Getenv(envToken)
	os.Unsetenv(envToken)
	if file == "" {
		return strings.TrimSpace(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	return tok, nil
}

func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && transport.IsLoopbackHost(host)
}

func runServe(cmd *cobra.Command, f serveFlags, args []string) error {
	// Signals as for a stdio chain (runChain), from the start: SIGINT,
	// SIGTERM or SIGHUP stops every chain along its shutdown path, a second
	// one skips what is left of their drains.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, abort, stopSignals := onSignals(cmd.Context())
	defer stopSignals()

	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	loopback := isLoopbackAddr(f.listen)
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		// Said first: 127.0.0.1 alone would read as not loopback below.
		return fmt.Errorf("--listen %q: want HOST:PORT, such as 127.0.0.1:8765: %w", f.listen, err)
	}
	switch {
	case token == "" && !f.insecureNoAuth:
		return fmt.Errorf("no token: give --token-file or set %s (or, on a loopback address only, --insecure-no-auth)", envToken)
	case token == "" && !loopback:
		return fmt.Errorf("--insecure-no-auth is allowed on a loopback address only, not %s", f.listen)
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case !loopback && f.tlsCert == "":
		return fmt.Errorf("%s is not a loopback address: serve it over TLS (--tls-cert, --tls-key), or listen on loopback behind a tunnel", f.listen)
	case f.idleTimeout <= 0:
		return fmt.Errorf("--idle-timeout must be positive, not %s", f.idleTimeout)
	case f.pingInterval < 0:
		return fmt.Errorf("--ping-interval must be positive, or 0 for none, not %s", f.pingInterval)
	case f.maxTCPConns < 0:
		return fmt.Errorf("--max-tcp-connections must be positive, or 0 for the default, not %d", f.maxTCPConns)
	}
	// Loaded now, not as serving starts, so that a bad pair stops serve
	// before it claims to be serving, with the flags named.
	var cert tls.Certificate
	if f.tlsCert != "" {
		if cert, err = tls.LoadX509KeyPair(f.tlsCert, f.tlsKey); err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", f.tlsCert, f.tlsKey, err)
		}
	}

	file, _ := cmd.Flags().GetString("config")
	mode := conductor.AgentMode
	if f.proxy {
		mode = conductor.ProxyMode
	}
	cfg, err := config.LoadChecked(config.Options{Mode: mode, File: file, Components: args, Flags: cmd.Flags()})
	if err != nil {
		return err
	}
	log, closeLog, err := newLogger(cfg.Logging, cfg.Name, cfg.LogFileFrom)
	if err != nil {
		return err
	}
	defer closeLog()
	for _, name := range config.UnknownEnv(os.Environ()) {
		log.Warn("ignored an unknown setting in the environment", zap.String("variable", name))
	}
	// A chain file or an environment shared with agent and proxy may set
	// spin, which serve cannot refuse as it does --spin; it says it does
	// not apply. A spin of 0 asks for what serve does anyway.
	if cfg.SpinFrom != "" && cfg.Spin > 0 {
		log.Info("ignored the spin setting: serve does not spin", zap.String("from", cfg.SpinFrom), zap.Duration("spin", cfg.Spin))
	}
	if ctx.Err() != nil {
		log.Info("stopped before serving", zap.Error(context.Cause(ctx)))
		return nil
	}

	if cfg.MaxMessageBytesFrom == "" {
		cfg.MaxMessageBytes = serveMaxMessageBytes
	}
	cc := cfg.Conductor(log)
	cc.Abort = abort
	if exe, err := os.Executable(); err == nil {
		cc.Supervisor = exe
	}
	// One trace for every connection's chain, each event marked with its
	// connection's Acp-Connection-Id.
	var stopTrace func()
	if cc.Trace, stopTrace, err = startTrace(cfg.Trace, cfg.Name, cfg.TraceFileFrom, log); err != nil {
		return err
	}
	defer stopTrace()
	var running chainCount
	srv := &transport.Server{
		MaxConnections:  f.maxConns,
		MaxMessageBytes: cc.MaxMessageBytes,
		IdleTimeout:     f.idleTimeout,
		PingInterval:    pingField(f.pingInterval),
		Logger:          log,
		Serve: func(ctx context.Context, c transport.Conn, info transport.ConnInfo) {
			cc := cc
			cc.Trace = cc.Trace.ForConnection(info.ID)
			serveChain(ctx, cc, c, f.idleTimeout, &running, log.With(zap.String("connection", info.ID)))
		},
	}
	guard := &transport.Guard{Token: token, Loopback: loopback, AllowedHosts: f.allowHosts, Logger: log}
	mux := http.NewServeMux()
	mux.Handle(f.path, guard.Wrap(srv))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: admitTimeout,
		// AdmitListener's: only a request the guard lets through keeps
		// a connection, HTTP/2's (which ReadHeaderTimeout does not
		// bound) too.
		ConnContext: transport.ConnContext,
		ErrorLog:    zap.NewStdLog(log.Named("http")),
		Protocols:   new(http.Protocols),
		// Between requests only: an SSE stream is a request in progress,
		// and a WebSocket has left the server's hands.
		IdleTimeout: min(keepAliveIdle, f.idleTimeout),
	}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	if f.tlsCert == "" {
		hs.Protocols.SetUnencryptedHTTP2(true) // h2c, loopback only (checked above)
	} else {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	// The heartbeat's interval also bounds, twice over, how long what the
	// server sends may go unacknowledged: a Streamable HTTP client whose
	// network vanished has its streams written to, never acknowledged.
	ln, err := transport.Listen(ctx, f.listen, 2*f.pingInterval)
	if err != nil {
		return listenError("--listen", f.listen, err)
	}
	maxTCP := f.maxTCPConns
	if maxTCP == 0 {
		maxTCP = defaultMaxTCP(f.maxConns)
	}
	ln = transport.AdmitListener(transport.LimitListener(ln, maxTCP), admitTimeout)
	scheme := "ws"
	if f.tlsCert != "" {
		scheme = "wss"
	}
	log.Info("serving", zap.String("url", scheme+"://"+ln.Addr().String()+f.path), zap.String("chain", cfg.Summary()),
		zap.Bool("auth", token != ""), zap.Int("max_connections", f.maxConns), zap.Int("max_tcp_connections", maxTCP),
		zap.String("version", version()))

	served := make(chan error, 1)
	go func() {
		if f.tlsCert != "" {
			served <- hs.ServeTLS(ln, "", "")
		} else {
			served <- hs.Serve(ln)
		}
	}()
	select {
	case err = <-served:
	case <-ctx.Done():
		log.Info("stopping", zap.Int("connections", srv.Active()))
	}
	// Chains first, along their own shutdown path, their connections open
	// until each has ended, so that what is in flight still reaches its
	// client; then the listener and the requests still open.
	sctx, cancel := context.WithTimeout(context.Background(), cc.GracePeriod+time.Second)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		log.Warn("chains still running after the grace period were closed", zap.Duration("grace", cc.GracePeriod))
	}
	_ = hs.Shutdown(sctx)
	hs.Close()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("server failed", zap.Error(err))
		return reportedError{err}
	}
	log.Info("stopped")
	return nil
}

// defaultMaxTCP bounds the TCP connections open at once, each a file
// descriptor that, without a token, an attacker may hold for admitTimeout:
// enough for each chain's streams over HTTP/1.1 (a TCP connection each)
// and a few POSTs, or for 16 chains' when chains are unbounded.
func defaultMaxTCP(maxConns int) int {
	if maxConns <= 0 {
		maxConns = 16
	}
	return maxConns * (transport.DefaultMaxStreams + 8)
}

// admitTimeout is how long a TCP connection may take to send its first
// request that the guard lets through: an HTTP/1 one its headers, an
// HTTP/2 one, which may send its preface alone and hold the connection
// for the keep-alive, its whole request.
const admitTimeout = 10 * time.Second

// keepAliveIdle is how long serve keeps a TCP connection that has no
// request in progress. The kernel's keep-alive notices a peer that is gone,
// not one that holds an idle connection for ever. It is longer than the 90 s
// Go's client, and browsers, keep an idle connection for, so that it is
// usually the client that closes it: a POST sent on a connection the server
// has just closed fails, and is not retried.
const keepAliveIdle = 2 * time.Minute

// pingField turns a --ping-interval into a PingInterval field of the
// transport package, whose zero is the default and negative is none.
func pingField(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// serveChain runs one chain for c, from its first message to its end,
// counted among those running. A WebSocket is opened before its
// initialize; the chain starts only once a first message has come, so an
// idle socket costs no process. One that sends none within idle is ended:
// it holds a connection slot, and answering pings is not asking anything.
func serveChain(ctx context.Context, cc conductor.Config, c transport.Conn, idle time.Duration, running *chainCount, log *zap.Logger) {
	firstCtx, cancel := context.WithTimeout(ctx, idle)
	defer cancel()
	first, err := c.Read(firstCtx)
	if err != nil {
		if ctx.Err() == nil && firstCtx.Err() != nil {
			log.Info("closing a connection that sent no first message", zap.Duration("idle", idle))
			return
		}
		log.Info("connection ended before its first message")
		return
	}
	cc.Logger = log
	// ctx ends when serve stops: the chain then drains along its shutdown
	// path, and what it still sends must reach the client. The connection
	// ends when the chain does (Serve returns), or when the client ends it.
	r, w := transport.Lines(context.WithoutCancel(ctx), &primed{Conn: c, first: first})
	running.begin()
	defer running.end()
	err = conductor.Run(ctx, cc, r, w)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		log.Info("chain stopped")
	default:
		log.Error("chain failed", zap.Error(err))
	}
}

// A chainCount counts the chains serve runs. When the last one ends, what
// the process adopted (a process a component started in a session of its
// own, with an environment of its own, and orphaned) was left by chains
// that have ended, and is killed; a chain starting meanwhile waits for
// that, so that nothing of its own is taken for a leftover.
type chainCount struct {
	mu sync.Mutex
	n  int
}

func (c *chainCount) begin() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *chainCount) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 {
		supervisor.KillAdopted()
	}
}

// primed is a Conn whose first message has already been read.
type primed struct {
	transport.Conn
	first []byte
}

func (p *primed) Read(ctx context.Context) ([]byte, error) {
	if m := p.first; m != nil {
		p.first = nil
		return m, nil
	}
	return p.Conn.Read(ctx)
}

// listenError says what to do about the commonest failure to listen, a
// port some other program holds, which the bare error does not.
func listenError(flag, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: the port is in use by another program: stop it, or give another port (port 0 picks a free one, logged at start): %w", flag, addr, err)
	}
	return err
}
