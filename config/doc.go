// Package config reads, checks and layers the settings of an acp-conductor
// chain and turns them into a conductor.Config.
//
// A chain is a list of proxies, nearest the editor first, and in agent mode a
// final agent. It comes either from a YAML chain file or from command-line
// components, never both. A command-line component is one shell-words string
// whose leading NAME=value words become its environment, for example
// "API_KEY=abc ctx-proxy --flag 'a b'"; it is split like a POSIX shell would
// split it (quotes and backslashes as a shell reads them) but never run by
// one, so $VAR and globs are not expanded, and an unquoted operator such as
// |, a parenthesis, a backquote or a # that would start a comment is an
// error rather than a word. A chain file is decoded strictly: an unknown key, a value of
// the wrong type or an invalid value is reported as a Problem carrying its
// line, and every problem in the file is reported at once.
//
// The scalar settings are layered by viper, highest priority first:
// command-line flags, ACP_CONDUCTOR_* environment variables, the chain file,
// built-in defaults; viper alone decides which layer wins. Each layer is
// checked where it enters (the file by Parse, on its lines; flags and
// environment variables by Load, each problem naming its flag or variable),
// so a bad value is an error even where a higher layer overrides it. A setting's environment variable is ACP_CONDUCTOR_
// followed by its chain-file key, upper-cased, with dots as underscores:
//
//	chain-file key     flag                 environment variable              default
//	name               --name               ACP_CONDUCTOR_NAME                ""
//	logging.level      --log-level          ACP_CONDUCTOR_LOGGING_LEVEL       info
//	logging.format     --log-format         ACP_CONDUCTOR_LOGGING_FORMAT      console
//	logging.file       --log-file           ACP_CONDUCTOR_LOGGING_FILE        "" (stderr)
//	shutdown_grace     --shutdown-grace     ACP_CONDUCTOR_SHUTDOWN_GRACE      2s
//	max_message_bytes  --max-message-bytes  ACP_CONDUCTOR_MAX_MESSAGE_BYTES   67108864
//	init_timeout       --init-timeout       ACP_CONDUCTOR_INIT_TIMEOUT        60s
//	restart_limit      --restart-limit      ACP_CONDUCTOR_RESTART_LIMIT       3
//	restart_window     --restart-window     ACP_CONDUCTOR_RESTART_WINDOW      1m
//	restart_backoff    --restart-backoff    ACP_CONDUCTOR_RESTART_BACKOFF     100ms
//	restart_backoff_max  --restart-backoff-max  ACP_CONDUCTOR_RESTART_BACKOFF_MAX  5s
//	mcp_bridge         --mcp-bridge         ACP_CONDUCTOR_MCP_BRIDGE          auto
//	mcp_http_idle_timeout  --mcp-http-idle-timeout  ACP_CONDUCTOR_MCP_HTTP_IDLE_TIMEOUT  30m (0: never)
//	trace.file         --trace              ACP_CONDUCTOR_TRACE_FILE          "" (no trace)
//	trace.detail       --trace-detail       ACP_CONDUCTOR_TRACE_DETAIL        full (or metadata)
//	trace.serve        --trace-serve        ACP_CONDUCTOR_TRACE_SERVE         "" (no live viewer)
//	spin               --spin               ACP_CONDUCTOR_SPIN                100µs (0: no spinning; at most 1ms)
//
// spin bounds how long the relay of an agent or proxy chain, finding its
// inputs empty, polls them before it sleeps: lower latency for fast replies
// against some CPU while they come fast. serve does not spin: it defines
// no --spin (AddFlags' except), and Config.SpinFrom lets it say that it
// ignores a spin the file or the environment sets.
//
// Each component may also say what happens when it fails (on_failure: fail,
// the default; restart or bypass, for proxies only).
//
// An empty environment variable counts as unset. Components never pass
// through viper: it folds map keys to lower case, and environment variable
// names given to a component must keep theirs.
package config
