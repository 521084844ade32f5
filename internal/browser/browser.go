// Package browser runs headless Chromium for the tests of the trace
// viewer: it finds the browser, installing Debian's chromium package when
// it is missing and the tests run as root, and renders pages with
// --dump-dom. It is for tests only; the product never starts a browser.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

var (
	once   sync.Once
	path   string
	reason error
)

// Names are the executables tried, in order.
var Names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Find returns the browser's executable. On first use, when none is in
// PATH, it installs Debian's chromium with apt-get (as root only), telling
// progress on stderr. The error says why there is no browser.
func Find() (string, error) {
	once.Do(func() {
		if path, reason = look(); reason == nil {
			return
		}
		if err := install(); err != nil {
			reason = fmt.Errorf("no headless browser (%v in PATH), and installing Debian's chromium failed: %w", Names, err)
			return
		}
		path, reason = look()
	})
	return path, reason
}

func look() (string, error) {
	for _, n := range Names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no browser in PATH")
}

func install() error {
	if os.Geteuid() != 0 {
		return errors.New("not root: run apt-get install -y chromium yourself")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("no apt-get on this system")
	}
	fmt.Fprintln(os.Stderr, "browser: installing chromium for the viewer tests (apt-get update && apt-get install -y chromium)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "-o", "DPkg::Lock::Timeout=300", "--no-install-recommends", "chromium"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %v: %w\n%s", args, err, tail(out))
		}
	}
	return nil
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// DumpDOM loads url in a fresh headless browser with a window of the
// given size and returns the DOM once the page has loaded and its scripts
// have run.
func DumpDOM(ctx context.Context, url string, width, height int) (string, error) {
	exe, err := Find()
	if err != nil {
		return "", err
	}
	profile, err := os.MkdirTemp("", "acp-browser-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	cmd := exec.CommandContext(ctx, exe,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, fmt.Sprintf("--window-size=%d,%d", width, height),
		"--dump-dom", url)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", exe, err, tail(stderr.Bytes()))
	}
	return out.String(), nil
}
