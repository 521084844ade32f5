package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/conductor"
	"github.com/acp-conductor/acp-conductor/config"
)

// addChainFlags defines the flags shared by the commands that run a chain.
func addChainFlags(cmd *cobra.Command) {
	cmd.Flags().StringP("config", "c", "", "read the chain from this YAML file instead of the arguments")
	config.AddFlags(cmd.Flags())
	cmd.Flags().SortFlags = false
}

// runChain loads the chain for mode from the command line, starts logging,
// and runs the conductor on stdin and stdout until the client hangs up, a
// component fails, or SIGINT or SIGTERM arrives.
func runChain(cmd *cobra.Command, mode conductor.Mode, args []string) error {
	file, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(config.Options{Mode: mode, File: file, Components: args, Flags: cmd.Flags()})
	if err != nil {
		return err
	}
	// Fail before the editor's initialize, naming the component, rather than
	// after it with a broken chain.
	if err := cfg.CheckCommands(); err != nil {
		return err
	}
	log, closeLog, err := newLogger(cfg.Logging, cfg.Name)
	if err != nil {
		return err
	}
	defer closeLog()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A client that hangs up makes writes to stdout fail with EPIPE. Without
	// this the first such write would kill the conductor outright, leaving its
	// components orphaned; a handler, unlike SIG_IGN, is not inherited by them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	log.Info("starting", zap.Stringer("mode", mode), zap.String("chain", cfg.Summary()), zap.String("version", version()))
	cc := cfg.Conductor(log)
	if exe, err := os.Executable(); err == nil {
		cc.Supervisor = exe // components die with the conductor, even by SIGKILL
	}
	err = conductor.Run(ctx, cc, conductor.Stdin(), conductor.Stdout())
	switch {
	case err == nil:
		log.Info("stopped")
		return nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		log.Info("stopped by signal")
		return nil
	}
	log.Error("conductor failed", zap.Error(err))
	if cfg.Logging.File != "" {
		// The log is out of sight; leave the reason where an editor shows it.
		fmt.Fprintf(os.Stderr, "acp-conductor: %v (see %s)\n", err, cfg.Logging.File)
	}
	return reportedError{err}
}
