// Package procs holds what the programs that run mcpqueue processes on this
// machine and talk to them share — the integration harness, the bench, the
// Redis test server, the bridge, the health check and the demo tools: a
// child process in its own process group (Proc, Start; DieWithParent ties
// its life to ours on Linux), a free loopback port, a sleep that ends with
// its context, a GET that fails on an answer other than 2xx, and the last
// data line of a server-sent-events body.
package procs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Sleep waits d, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get GETs url with ctx. An answer other than 2xx is an error that quotes
// the status and the first 512 bytes of the body; otherwise the caller reads
// and closes the body.
func Get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return resp, nil
}

// LastSSEData is the payload of the last "data: " line of an SSE body (nil
// if there is none): the JSON-RPC answer of a streamed response.
func LastSSEData(b []byte) []byte {
	var last []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			last = d
		}
	}
	return last
}
