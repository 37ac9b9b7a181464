package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
)

// A request refused before its body is read — bad Origin, no token, 405,
// 415, the console's 401, a POST to /healthz — that declares a body and
// never sends it is answered and its connection closed at once, long before
// the body timeout (a minute here); a body that does arrive is read and the
// connection kept.
func TestRefusedBodiesAreNotAwaited(t *testing.T) {
	store := memstate.New(nil)
	q := membroker.NewQueue(nil)
	bus := membroker.NewBus()
	prod := producer.New(store, producer.QueueExecutor{Queue: q, Bus: bus}, nil)
	authn, err := jwtauth.New(&jwtauth.Config{Issuer: "https://idp.test", Audience: "http://127.0.0.1/mcp", HS256Key: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	mux := cli.AdminMux(cli.NewRegistry())
	mux.Handle("/mcp", mcpfront.New(prod, backend.Backend{Store: store, Catalog: store, Bus: bus}, &mcpfront.Config{Auth: authn, StateKey: []byte("k")}))
	mux.Handle("/open", mcpfront.New(prod, backend.Backend{Store: store, Catalog: store, Bus: bus}, &mcpfront.Config{StateKey: []byte("k")}))
	mux.Handle(console.Path, console.New(t.Context(), console.Config{Store: store, Producer: prod, Admins: []console.Admin{{Subject: "ops"}},
		Authenticate: func(r *http.Request) (console.Identity, error) {
			p, err := authn.Authenticate(r)
			return console.Identity{Subject: p.Subject, Owner: p.Owner()}, err
		}}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: guardBodies(mux, time.Minute), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	for _, c := range []struct {
		name, head string
		status     int
	}{
		{"bad Origin", "POST /open HTTP/1.1\r\nOrigin: https://evil.test\r\nContent-Type: application/json", 403},
		{"no token", "POST /mcp HTTP/1.1\r\nContent-Type: application/json", 401},
		{"405", "PUT /open HTTP/1.1\r\nContent-Type: application/json", 405},
		{"415", "POST /open HTTP/1.1\r\nContent-Type: text/plain", 415},
		{"console 401", "POST /console/api/tasks/x/cancel HTTP/1.1\r\nContent-Type: application/json", 401},
		{"POST /healthz", "POST /healthz HTTP/1.1\r\nContent-Type: application/json", 200},
		{"chunked, no token", "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked", 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := c.head + "\r\nHost: " + addr + "\r\n"
			if !strings.Contains(head, "chunked") {
				head += "Content-Length: 1000\r\n"
			}
			if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			_ = conn.SetReadDeadline(began.Add(5 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 5s: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("after the answer the connection was not closed (%v after %s): the server waits for the body", err, time.Since(began).Round(time.Millisecond))
			}
		})
	}

	t.Run("body arrives", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		br := bufio.NewReader(conn)
		for i := range 2 { // twice on one connection: it is kept alive
			fmt.Fprintf(conn, "POST /open HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nContent-Length: %d\r\n\r\n", addr, len(body))
			_, _ = io.WriteString(conn, body[:10])
			_, _ = io.WriteString(conn, body[10:])
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d: %v", i+1, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("request %d: %d close=%v %s", i+1, resp.StatusCode, resp.Close, b)
			}
		}
	})
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && strings.Contains(err.Error(), "reset")
}
