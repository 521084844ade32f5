package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/trace"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Look at traces written with --trace",
		Long: `A chain run with --trace FILE writes every message that crosses the
conductor to FILE, one JSON event per line, in the event shape of the Rust
conductor's .jsons traces. "acp-conductor trace view" turns such a file into
a sequence diagram you open in a browser; --trace-serve shows the same
diagram live while the chain runs.`,
		Example: `  # Record a chain's messages, then draw them:
  acp-conductor agent --trace /tmp/chain.jsons --config chain.yaml
  acp-conductor trace view /tmp/chain.jsons            # writes /tmp/chain.html

  # Keep only what can go into a public bug report:
  acp-conductor agent --trace /tmp/chain.jsons --trace-detail metadata --config chain.yaml

  # Watch the chain live instead (the viewer's URL is logged at start-up):
  acp-conductor agent --trace-serve 127.0.0.1:0 --config chain.yaml`,
	}
	cmd.AddCommand(newTraceViewCmd())
	return cmd
}

func newTraceViewCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "view [flags] FILE",
		Short: "Render a trace as one self-contained HTML page",
		Long: `Render the trace in FILE as a sequence diagram: one lifeline per component
(client, each proxy, the agent), one arrow per message, requests solid,
responses dashed, notifications dotted, MCP-over-ACP traffic in purple.
Filter by session or method at the top (and by connection, in a trace that
"serve" wrote for many); click an arrow to see the whole message. The
filters and the selected message are kept in the URL's fragment
(#connection=C&session=S&method=M&select=N), so a view can be shared.

The page is one file with everything inside it: it loads nothing from the
network and can be attached to a bug report. Without -o it is written next
to FILE, with the extension .html. Where it went is said on stderr. A last
line cut short, in the trace of a chain still running or killed, is left
out, and stderr says so.`,
		Example: `  acp-conductor agent --trace /tmp/chain.jsons "my-proxy" "my-agent --acp"
  acp-conductor trace view /tmp/chain.jsons            # writes /tmp/chain.html
  acp-conductor trace view /tmp/chain.jsons -o - > page.html`,
		Args: wantArgs(1, 1, "trace FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return traceView(args[0], out, title, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", `write the page here ("-": standard output); default: FILE with the extension .html`)
	cmd.Flags().StringVar(&title, "title", "", "the page's title; default: the trace file's name")
	return cmd
}

// traceView renders the trace in the file in as a page written to out, or
// to stdout if out is "-". A page written to a file is named on stderr,
// by its absolute path, since the user has to open it and may not have
// chosen its name.
func traceView(in, out, title string, stdout, stderr io.Writer) error {
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("trace view: %w", err)
	}
	events, err := trace.ReadEvents(f)
	f.Close()
	if errors.Is(err, trace.ErrCutShort) {
		// The trace of a running or crashed chain: what came before the
		// line it was writing is worth seeing.
		fmt.Fprintf(stderr, "trace view: %s: %v; left out\n", in, err)
	} else if err != nil {
		return fmt.Errorf("trace view: %s: %w", in, err)
	}
	if title == "" {
		title = filepath.Base(in)
	}
	if out == "" {
		out = strings.TrimSuffix(in, filepath.Ext(in)) + ".html"
	}
	if out == "-" {
		return trace.View(stdout, events, trace.ViewOptions{Title: title})
	}
	// The same file, however it is named (a link to the trace, or the
	// trace's own name): creating the page would truncate the trace.
	if fo, err := os.Stat(out); err == nil {
		if fi, err := os.Stat(in); err == nil && os.SameFile(fi, fo) {
			return fmt.Errorf("trace view: the output %s would overwrite the trace", out)
		}
	}
	// As private as the trace the conductor writes (0600): the page holds
	// every message of it.
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("trace view: %w", err)
	}
	if err := trace.View(w, events, trace.ViewOptions{Title: title}); err != nil {
		w.Close()
		return fmt.Errorf("trace view: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("trace view: %w", err)
	}
	noun := "events"
	if len(events) == 1 {
		noun = "event"
	}
	fmt.Fprintf(stderr, "wrote %s (%d %s): open it in a browser\n", abs(out), len(events), noun)
	return nil
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// startTrace starts what t asks for: a trace file, a live viewer, both or
// neither. It returns the recorder for the conductor (nil when neither) and
// a function that flushes and closes everything, to be called once the
// chain has stopped. from says where t.File was set
// (config.Config.TraceFileFrom), for an error with the file to name.
func startTrace(t config.Trace, name, from string, log *zap.Logger) (*trace.Recorder, func(), error) {
	if t.File == "" && t.Serve == "" {
		return nil, func() {}, nil
	}
	opts := trace.Options{Detail: trace.Detail(t.Detail), Logger: log}
	var file *os.File
	if t.File != "" {
		if err := notStdout(t.File); err != nil {
			return nil, nil, fileError("trace.file", err, from)
		}
		var err error
		if file, err = openOutput(t.File, os.O_TRUNC, 0o600); err != nil {
			return nil, nil, fileError("trace.file", err, from)
		}
	}
	var srv *trace.Server
	if t.Serve != "" {
		opts.Live = trace.NewHub(0)
		title := "acp-conductor trace"
		if name != "" {
			title += ": " + name
		}
		var err error
		if srv, err = trace.Serve(t.Serve, opts.Live, title, log); err != nil {
			if file != nil {
				file.Close()
			}
			return nil, nil, listenError("--trace-serve (trace.serve)", t.Serve, err)
		}
		// The token is in the URL because a person opens it in a browser.
		log.Info("live trace viewer: open this URL in a browser on this machine", zap.String("url", srv.URL()))
	}
	var w io.Writer
	if file != nil {
		w = file
		log.Info("tracing", zap.String("file", t.File), zap.String("detail", t.Detail))
	}
	rec := trace.NewRecorder(w, opts)
	return rec, func() {
		if err := rec.Close(); err != nil {
			log.Warn("trace incomplete", zap.Error(err))
		}
		if file != nil {
			file.Close()
		}
		if srv != nil {
			srv.Close()
		}
	}, nil
}
