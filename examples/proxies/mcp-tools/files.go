package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
)

// newServer returns the MCP server, with its one tool.
func newServer(maxEntries int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-tools", Title: "acp-conductor example tools", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name: "list_files",
		Description: "List the files in the session's working directory, or in a directory under it. " +
			"Directories end in /. Paths outside the working directory are refused.",
	}, func(ctx context.Context, req *mcp.CallToolRequest, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
		conn := mcpsdk.Conn(req.Session)
		if conn == nil {
			return nil, listFilesOut{}, errors.New("this server serves ACP sessions only")
		}
		out, err := listFiles(conn.Session().Cwd, in, maxEntries)
		if err != nil {
			return nil, listFilesOut{}, err // the SDK makes it an error result, for the model to read
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.String()}}}, out, nil
	})
	return s
}

type listFilesIn struct {
	Path      string `json:"path,omitempty" jsonschema:"the directory to list, relative to the session's working directory (or absolute, inside it); default: the working directory"`
	Pattern   string `json:"pattern,omitempty" jsonschema:"list only the names that match this shell pattern, such as *.go"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list the directories under it too (skipping .git)"`
}

type listFilesOut struct {
	Dir       string   `json:"dir" jsonschema:"the directory listed, as an absolute path"`
	Entries   []string `json:"entries" jsonschema:"paths relative to dir, with / between names; directories end in /"`
	Truncated bool     `json:"truncated,omitempty" jsonschema:"true if there were more entries than the proxy lists"`
}

func (o listFilesOut) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", o.Dir)
	for _, e := range o.Entries {
		b.WriteString(e + "\n")
	}
	switch {
	case o.Truncated:
		fmt.Fprintf(&b, "(only the first %d entries are listed)\n", len(o.Entries))
	case len(o.Entries) == 0:
		b.WriteString("(nothing)\n")
	}
	return b.String()
}

// listFiles lists a directory under cwd. Every access goes through an
// os.Root opened at cwd, which refuses any path that leaves it, whether by
// "..", by an absolute name or by a symbolic link; the checks before it only
// make the error clearer.
func listFiles(cwd string, in listFilesIn, max int) (listFilesOut, error) {
	if !filepath.IsAbs(cwd) {
		return listFilesOut{}, errors.New("the session has no working directory")
	}
	rel := in.Path
	if rel == "" {
		rel = "."
	}
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(cwd, rel)
		if err != nil {
			return listFilesOut{}, fmt.Errorf("%s is outside the working directory %s", in.Path, cwd)
		}
		rel = r
	}
	if !filepath.IsLocal(rel) {
		return listFilesOut{}, fmt.Errorf("%s is outside the working directory %s", in.Path, cwd)
	}
	if in.Pattern != "" {
		if _, err := path.Match(in.Pattern, ""); err != nil {
			return listFilesOut{}, fmt.Errorf("pattern %q: %w", in.Pattern, err)
		}
	}
	root, err := os.OpenRoot(cwd)
	if err != nil {
		return listFilesOut{}, err
	}
	defer root.Close()
	fsys, dir := root.FS(), filepath.ToSlash(filepath.Clean(rel))

	out := listFilesOut{Dir: filepath.Join(cwd, rel), Entries: []string{}}
	add := func(name string, isDir bool) bool {
		if in.Pattern != "" {
			if ok, _ := path.Match(in.Pattern, path.Base(name)); !ok {
				return true
			}
		}
		if len(out.Entries) == max {
			out.Truncated = true
			return false
		}
		if isDir {
			name += "/"
		}
		out.Entries = append(out.Entries, name)
		return true
	}
	if !in.Recursive {
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return listFilesOut{}, clean(err, cwd)
		}
		for _, e := range entries {
			if !add(e.Name(), e.IsDir()) {
				break
			}
		}
		return out, nil
	}
	err = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == dir:
			return nil
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		}
		name := strings.TrimPrefix(p, dir+"/")
		if dir == "." {
			name = p
		}
		if !add(name, d.IsDir()) {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return listFilesOut{}, clean(err, cwd)
	}
	slices.Sort(out.Entries) // WalkDir's order, made plain
	return out, nil
}

// clean rewords the errors of a listing for the model to read: relative to
// the session's directory, with the reason in plain words.
func clean(err error, cwd string) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist in %s", pe.Path, cwd)
	case strings.Contains(pe.Err.Error(), "escapes"):
		return fmt.Errorf("%s leads outside the working directory %s", pe.Path, cwd)
	default:
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
}
