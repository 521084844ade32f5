package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// StartPartsResult is the median, over the launches, of the time from
// launching every component at once to the last of them having answered its
// initialize.
type StartPartsResult struct {
	InitNs int64 `json:"initNs"`
}

const proxyInitLine = `{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}}` + "\n"

// runStartParts measures what the components of a chain take to start by
// themselves: it launches every command after "--" (each one string, split
// at spaces; the last is the agent, the others proxies) together, as the
// conductor does, and initializes each directly, playing the conductor for
// the proxies (it answers their successor's initialize at once).
func runStartParts(args []string) error {
	fs := flag.NewFlagSet("startparts", flag.ContinueOnError)
	repeat := fs.Int("repeat", 10, "launches")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmds := fs.Args()
	if len(cmds) == 0 {
		return errors.New("no components")
	}
	var times []int64
	for range *repeat {
		d, err := startPartsOnce(cmds)
		if err != nil {
			return err
		}
		times = append(times, int64(d))
	}
	return json.NewEncoder(os.Stdout).Encode(StartPartsResult{InitNs: median(times)})
}

func startPartsOnce(cmds []string) (time.Duration, error) {
	t := time.Now()
	children := make([]*child, len(cmds))
	for i, cmd := range cmds {
		c, err := launch(strings.Fields(cmd))
		if err != nil {
			return 0, err
		}
		defer c.finish()
		defer c.watchdog(time.Minute)()
		children[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cmds))
	for i, c := range children {
		isAgent := i == len(cmds)-1
		wg.Go(func() { errs[i] = initDirectly(c, isAgent) })
	}
	wg.Wait()
	d := time.Since(t)
	return d, errors.Join(errs...)
}

func initDirectly(c *child, isAgent bool) error {
	if isAgent {
		_, err := c.call([]byte(initLine))
		return err
	}
	if err := c.send([]byte(proxyInitLine)); err != nil {
		return err
	}
	// The proxy initializes its successor first.
	m, err := c.recv()
	if err != nil {
		return err
	}
	if m.Method != "proxy/successor" || m.ID == nil {
		return fmt.Errorf("proxy sent %s, want its successor's initialize", m.Bytes())
	}
	answer := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}` + "\n"
	if err := c.send([]byte(answer)); err != nil {
		return err
	}
	m, err = c.recv()
	if err != nil {
		return err
	}
	if !m.IsResponse() || string(m.ID) != "0" || m.Error != nil {
		return fmt.Errorf("proxy answered proxy/initialize with %s", m.Bytes())
	}
	return nil
}
