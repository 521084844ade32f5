package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// addChainFlags defines the flags shared by the commands that run a chain,
// but for the settings (config keys) that cmd does not use, except.
func addChainFlags(cmd *cobra.Command, except ...string) {
	cmd.Flags().StringP("config", "c", "", "read the chain from this YAML file instead of the arguments")
	config.AddFlags(cmd.Flags(), except...)
	cmd.Flags().SortFlags = false
}

// refuseOnFlagError makes a mistake in the flags of cmd, a command that
// serves a chain on stdio, answer the editor's first request, as runChain
// answers a bad setting from the environment or the chain file: the flags
// are settings too, and an editor shows the answer where a closed pipe
// says nothing. cobra parses them before runChain runs.
func refuseOnFlagError(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) // as in runChain
		ctx, abort, stopSignals := onSignals(cmd.Context())
		defer stopSignals()
		untilAbort, cancel := abortContext(ctx, abort)
		defer cancel()
		file, _ := cmd.Flags().GetString("config")
		// The editor's error names the command whose flags are wrong: it
		// may be a conductor nested in a chain (acp-conductor proxy).
		_ = refuseChain(untilAbort, cmd, nil, file, fmt.Errorf("%s: %w", cmd.CommandPath(), err))
		return fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())
	})
}

// runChain loads the chain for mode from the command line, starts logging,
// and runs the conductor on stdin and stdout until the client hangs up, a
// component fails, or SIGINT, SIGTERM or SIGHUP arrives.
func runChain(cmd *cobra.Command, mode conductor.Mode, args []string) error {
	// Signals are handled from the start, so that one arriving while the
	// chain is loaded (a chain file on a slow disk, a FIFO) ends the
	// conductor as cleanly as one arriving later, not by their default action.
	//
	// A client that hangs up makes writes to stdout fail with EPIPE. Without
	// this the first such write would kill the conductor outright, leaving its
	// components orphaned; a handler, unlike SIG_IGN, is not inherited by them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, abort, stopSignals := onSignals(cmd.Context())
	defer stopSignals()

	file, _ := cmd.Flags().GetString("config")
	// A missing program fails before the chain starts, naming the
	// component, rather than midway through it.
	cfg, err := config.LoadChecked(config.Options{Mode: mode, File: file, Components: args, Flags: cmd.Flags()})
	// Refusing, or stopped before the chain started, the editor's first
	// request is still answered; only a second signal skips that.
	untilAbort, cancel := abortContext(ctx, abort)
	defer cancel()
	if err != nil {
		return refuseChain(untilAbort, cmd, cfg, file, err)
	}
	log, closeLog, err := newLogger(cfg.Logging, cfg.Name, cfg.LogFileFrom)
	if err != nil {
		return refuseChain(untilAbort, cmd, nil, file, err)
	}
	defer closeLog()
	for _, name := range config.UnknownEnv(os.Environ()) {
		log.Warn("ignored an unknown setting in the environment", zap.String("variable", name))
	}
	if ctx.Err() != nil {
		// Stopped before anything started: nothing to drain or stop, but
		// the editor still hears why.
		log.Info("stopped before the chain started", zap.Error(context.Cause(ctx)))
		cause := fmt.Errorf("the conductor is shutting down: %w", context.Cause(ctx))
		_ = conductor.Refuse(untilAbort, conductor.Config{GracePeriod: cfg.ShutdownGrace, MaxMessageBytes: cfg.MaxMessageBytes}, conductor.Stdin(), conductor.Stdout(), cause)
		return nil
	}

	log.Info("starting", zap.Stringer("mode", mode), zap.String("chain", cfg.Summary()), zap.String("version", version()),
		zap.Bool("spin", spinBeforeWaits(cfg.Spin)))
	cc := cfg.Conductor(log)
	cc.Abort = abort
	var stopTrace func()
	if cc.Trace, stopTrace, err = startTrace(cfg.Trace, cfg.Name, cfg.TraceFileFrom, log); err != nil {
		log.Error("the chain cannot start", zap.Error(err))
		return conductor.Refuse(untilAbort, conductor.Config{GracePeriod: cfg.ShutdownGrace, MaxMessageBytes: cfg.MaxMessageBytes}, conductor.Stdin(), conductor.Stdout(), err)
	}
	defer stopTrace()
	if exe, err := os.Executable(); err == nil && trick.On(trick.Supervisor) {
		cc.Supervisor = exe // nothing outlives the conductor, even killed by SIGKILL
	}
	err = conductor.Run(ctx, cc, conductor.Stdin(), conductor.Stdout())
	if err == nil {
		return nil // the conductor logged how it stopped
	}
	log.Error("conductor failed", zap.Error(err))
	if cfg.Logging.File != "" {
		// The log is out of sight; leave the reason where an editor shows it.
		fmt.Fprintf(os.Stderr, "acp-conductor: %v (see %s)\n", err, cfg.Logging.File)
	}
	return reportedError{err}
}

// refuseChain reports a chain that cannot start: to the log file the
// settings name, if they name one and it can be opened, and to the editor
// as the answer to its first request, unless stdin is a terminal, where a
// person would only wait for nothing (editorMayAsk). It returns cause,
// for stderr.
func refuseChain(ctx context.Context, cmd *cobra.Command, cfg *config.Config, file string, cause error) error {
	logging, name := config.Logging{Level: "info", Format: "console"}, ""
	if cfg != nil {
		logging, name = cfg.Logging, cfg.Name
	} else {
		logging.File = config.LogFileHint(file, cmd.Flags())
	}
	if logging.File != "" {
		if log, closeLog, err := newLogger(logging, name, ""); err == nil {
			log.Error("the chain cannot start", zap.Error(cause))
			closeLog()
		}
	}
	if !editorMayAsk(os.Stdin) {
		return cause
	}
	rc := conductor.Config{GracePeriod: conductor.DefaultGracePeriod}
	if cfg != nil {
		rc.MaxMessageBytes = cfg.MaxMessageBytes
		if cfg.ShutdownGrace > 0 {
			rc.GracePeriod = cfg.ShutdownGrace
		}
	}
	return conductor.Refuse(ctx, rc, conductor.Stdin(), conductor.Stdout(), cause)
}

// abortContext returns a context, not done with ctx, that is done once
// abort is closed; cancel releases it.
func abortContext(ctx context.Context, abort <-chan struct{}) (_ context.Context, cancel func()) {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-abort:
			stop()
		case <-ctx.Done():
		}
	})
	return ctx, func() { stop(); wg.Wait() }
}

// signalled is the cause a first signal ends onSignals' context with. Its
// message tells the editor that another one stops at once; a conductor
// that this one stops at once (the editor's input had ended already)
// names its signal alone, which its Signal method gives.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string     { return fmt.Sprintf("%v (another one stops at once)", s.sig) }
func (s signalled) Signal() os.Signal { return s.sig }

// onSignals returns a context that SIGINT, SIGTERM or SIGHUP (a closed
// terminal, or a supervisor that says stop) cancels, so that the chain
// drains and stops, and a channel that a second such signal closes, so that
// it stops at once. stop releases the signals.
func onSignals(parent context.Context) (ctx context.Context, abort <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancelCause(parent)
	aborted, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-sigs:
			cancel(signalled{s})
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(aborted)
		case <-done:
		}
	})
	return ctx, aborted, func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}
