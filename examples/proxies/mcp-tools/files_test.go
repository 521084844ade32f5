package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestListFiles(t *testing.T) {
	cwd := t.TempDir()
	for _, f := range []string{"a.txt", "b.go", "sub/c.go", "sub/deep/d.go", ".git/HEAD"} {
		p := filepath.Join(cwd, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(cwd, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(cwd, "link-in")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		in      listFilesIn
		max     int
		want    string // the entries, space-separated
		wantErr string
	}{
		{in: listFilesIn{}, want: ".git/ a.txt b.go link-in link-out sub/"},
		{in: listFilesIn{Path: "sub"}, want: "c.go deep/"},
		{in: listFilesIn{Path: "./sub/deep/.."}, want: "c.go deep/"},
		{in: listFilesIn{Path: filepath.Join(cwd, "sub")}, want: "c.go deep/"},
		{in: listFilesIn{Path: "link-in"}, want: "c.go deep/"},
		{in: listFilesIn{Pattern: "*.go", Recursive: true}, want: "b.go sub/c.go sub/deep/d.go"},
		{in: listFilesIn{Path: "sub", Recursive: true}, want: "c.go deep/ deep/d.go"},
		{in: listFilesIn{Recursive: true}, max: 2, want: "a.txt b.go"},
		{in: listFilesIn{Path: ".."}, wantErr: "outside the working directory"},
		{in: listFilesIn{Path: "sub/../../x"}, wantErr: "outside the working directory"},
		{in: listFilesIn{Path: outside}, wantErr: "outside the working directory"},
		{in: listFilesIn{Path: "link-out"}, wantErr: "link-out leads outside the working directory"},
		{in: listFilesIn{Path: "nope"}, wantErr: "nope does not exist"},
		{in: listFilesIn{Pattern: "["}, wantErr: "pattern"},
	} {
		max := tc.max
		if max == 0 {
			max = 100
		}
		out, err := listFiles(cwd, tc.in, max)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc.in, err)
		case strings.Join(out.Entries, " ") != tc.want:
			t.Errorf("%+v: %q, want %q", tc.in, out.Entries, tc.want)
		case out.Truncated != (tc.max != 0):
			t.Errorf("%+v: truncated %v", tc.in, out.Truncated)
		}
	}
	if _, err := listFiles("", listFilesIn{}, 10); err == nil {
		t.Error("listed a session with no directory")
	}
	out, _ := listFiles(cwd, listFilesIn{Path: "sub"}, 10)
	if want := filepath.Join(cwd, "sub") + ":\nc.go\ndeep/\n"; out.String() != want || !slices.Equal(out.Entries, []string{"c.go", "deep/"}) {
		t.Errorf("text %q, want %q", out.String(), want)
	}
}
