package config

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/acp-conductor/acp-conductor/conductor"
)

// CheckCommands reports each component whose program cannot be found, so
// that a typo fails at once with the component named rather than midway
// through an editor's initialize. It judges as exec does: a command with a
// slash is a path, relative to the component's working directory; any other
// is looked up in the conductor's PATH, unless the component sets its own.
func (c *Config) CheckCommands() error {
	return errors.Join(c.commandErrs()...)
}

// commandErrs is CheckCommands' list, one error a component.
func (c *Config) commandErrs() []error {
	var errs []error
	for role, comp := range c.runComponents() {
		if err := findCommand(comp); err != nil {
			errs = append(errs, fmt.Errorf("%s %q (%s): %w", role, comp.Name, comp.Origin, err))
		}
	}
	return errs
}

// runComponents yields the components c runs, proxies first, each with
// its role as problems name it ("proxy" or "agent"), so that one
// component's problems read alike; one connected to, or whose command
// is a problem already, is left out.
func (c *Config) runComponents() iter.Seq2[string, Component] {
	return func(yield func(string, Component) bool) {
		comps := c.Proxies
		if c.Mode == conductor.AgentMode {
			comps = append(comps[:len(comps):len(comps)], c.Agent)
		}
		for i, comp := range comps {
			role := "proxy"
			if c.Mode == conductor.AgentMode && i == len(comps)-1 {
				role = "agent"
			}
			if local(comp) && !yield(role, comp) {
				return
			}
		}
	}
}

func findCommand(c Component) error {
	if c.Cwd != "" {
		if fi, err := os.Stat(c.Cwd); err != nil {
			return fmt.Errorf("working directory: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("working directory %q is not a directory", c.Cwd)
		}
	}
	if _, ok := c.Env["PATH"]; ok {
		return nil // where it will be found depends on how it is started
	}
	if !strings.ContainsRune(c.Command, filepath.Separator) && !strings.ContainsRune(c.Command, '/') {
		_, err := exec.LookPath(c.Command)
		if errors.Is(err, exec.ErrDot) {
			return nil // found in the current directory; exec decides
		}
		if err != nil {
			return fmt.Errorf("command %q not found in PATH", c.Command)
		}
		return nil
	}
	path := c.Command
	if c.Cwd != "" && !filepath.IsAbs(path) {
		path = filepath.Join(c.Cwd, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("command %q: %w", c.Command, err)
	case fi.IsDir():
		return fmt.Errorf("command %q is a directory", c.Command)
	case fi.Mode()&0o111 == 0 && filepath.Separator == '/':
		return fmt.Errorf("command %q is not executable", c.Command)
	}
	return nil
}
