// Command healthcheck is the health check of the container images, which
// have no shell and no wget: it GETs one URL and exits 0 if the answer is
// 2xx, 1 otherwise (saying why on stderr), within a timeout.
//
//	HEALTHCHECK CMD ["/usr/local/bin/healthcheck", "http://127.0.0.1:8080/readyz"]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

func main() {
	fs := flag.NewFlagSet("healthcheck", flag.ExitOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "how long the request may take")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: healthcheck [--timeout 3s] URL\nexits 0 if a GET of URL answers 2xx, 1 otherwise")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if err := probe(fs.Arg(0), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

func probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := procs.Get(ctx, url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}
