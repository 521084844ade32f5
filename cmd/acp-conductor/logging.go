package main

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// newLogger returns a logger as l describes, writing to stderr or appending
// to l.File, and a function that flushes and closes it. It never writes to
// stdout, which belongs to the protocol. from says where l.File was set
// (config.Config.LogFileFrom), for an error with the file to name, as the
// other settings' errors do.
func newLogger(l config.Logging, name, from string) (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(l.Level)
	if err != nil {
		return nil, nil, fmt.Errorf("logging: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	if l.File == "" && os.Getenv(supervisor.ComponentEnv) != "" {
		// A component of another conductor (it sets the marker), which
		// logs each line of our stderr in one of its own, with the time:
		// one time is enough. The level stays: the outer one logs each
		// such line at the level it names.
		enc.TimeKey = zapcore.OmitKey
	}
	var encoder zapcore.Encoder
	switch l.Format {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	default:
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	}

	sink := zapcore.Lock(os.Stderr)
	closeSink := func() {}
	if l.File != "" {
		if err := notStdout(l.File); err != nil {
			return nil, nil, fileError("logging.file", fmt.Errorf("%w; leave the file empty to log to stderr", err), from)
		}
		// Opened directly rather than through zap.Open, which would take the
		// names "stdout" and "stderr" as the streams rather than as files.
		f, err := openOutput(l.File, os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fileError("logging.file", err, from)
		}
		sink, closeSink = zapcore.Lock(f), func() { f.Close() }
	}

	log := zap.New(zapcore.NewCore(encoder, sink, level), zap.ErrorOutput(zapcore.Lock(os.Stderr)))
	if name != "" {
		log = log.Named(name)
	}
	return log, func() { log.Sync(); closeSink() }, nil
}

// fileError reports err with the file set by key as config reports a bad
// setting: the key, then where it was set, if known.
func fileError(key string, err error, from string) error {
	if from == "" {
		return fmt.Errorf("%s: %w", key, err)
	}
	return fmt.Errorf("%s: %w (from %s)", key, err, from)
}

// notStdout refuses a path that names the file this process's standard
// output is, however it is spelled (a link to /dev/stdout, /proc/PID/fd/1,
// the file the editor redirected it to): what is written there mixes with
// the protocol. config refuses the usual spellings before this runs, but
// only this process's stdout tells what the others name. Both being
// /dev/null harms nothing.
func notStdout(path string) error {
	out, err := os.Stdout.Stat()
	if err != nil {
		return nil // no stdout to harm
	}
	fi, err := os.Stat(path)
	if err != nil || !os.SameFile(fi, out) {
		return nil
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(out, null) {
		return nil
	}
	return fmt.Errorf("%q is standard output, which carries the protocol", path)
}
