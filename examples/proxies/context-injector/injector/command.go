package injector

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"path/filepath"
)

// Usage is the context-injector command line.
const Usage = "context-injector [--file NAME]... [--max-bytes N]"

// ErrUsage is returned by [Run] for a command line it cannot use, after
// saying what is wrong on its stderr.
var ErrUsage = errors.New("usage error")

// Run is the context-injector command: it parses args (the command line
// without the program's name, as [Usage] describes) and serves one
// conductor on in and out until in ends, which is how a chain ends, or ctx
// is done. Its reports go to stderr, prefixed "context-injector: ".
//
// Run returns nil at the end of in and ctx.Err() if ctx ends first. For
// --help it prints the usage on stderr and returns [flag.ErrHelp]; for a
// bad command line it says what is wrong there and returns an error wrapping
// [ErrUsage]. Either way it serves nothing, and closes out.
func Run(ctx context.Context, args []string, in io.Reader, out io.WriteCloser, stderr io.Writer) error {
	fs := flag.NewFlagSet("context-injector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var names []string
	fs.Func("file", "look for an instructions file called `NAME` (repeatable; earlier names win within a directory; default "+DefaultFile+")", func(name string) error {
		if name == "" || filepath.IsAbs(name) {
			return errors.New("want a file name relative to the session's directory")
		}
		names = append(names, name)
		return nil
	})
	maxBytes := fs.Int64("max-bytes", DefaultMaxBytes, "inject at most `N` bytes of the file; the rest is left out with a note saying so")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n", Usage)
		fs.PrintDefaults()
	}
	usage := func(err error) error {
		out.Close()
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("context-injector: %w: %w", ErrUsage, err)
	}
	if err := fs.Parse(args); err != nil {
		return usage(err) // the flag package has said what is wrong
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "context-injector: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *maxBytes <= 0 {
		fmt.Fprintf(stderr, "context-injector: --max-bytes must be positive\n")
		return usage(errors.New("--max-bytes must be positive"))
	}

	p := New(names, *maxBytes, log.New(stderr, "context-injector: ", 0)).Proxy()
	p.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return p.Serve(ctx, in, out)
}
