// Command libproxy [NAME] is a passthrough ACP proxy built on the project's
// own proxy library (github.com/acp-conductor/acp-conductor/proxy) with no
// handlers: everything is forwarded as the library forwards what no handler
// claims. The integration tests run it next to the independent goproxy and
// the Python proxy.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/acp-conductor/acp-conductor/proxy"
)

func main() {
	name := "lib-proxy"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	log.SetFlags(0)
	log.SetPrefix(fmt.Sprintf("[%s %d] ", name, os.Getpid()))
	log.Print("started")
	if err := (&proxy.Proxy{}).Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatalf("serve: %v", err)
	}
	log.Print("stdin closed; exiting")
}
