package main

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Past --max-conns-per-client a connection is answered 503 and closed at
// once; a closed connection gives its place back.
func TestLimitConns(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(raw, 3, 1, zerolog.Nop())
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	first := dial()
	var held net.Conn
	select {
	case held = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the first connection was not accepted")
	}
	second := dial()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(second)
	if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 503") || !strings.Contains(string(b), "too many connections") {
		t.Fatalf("second connection from the same address: %q, %v; want a 503 and EOF", b, err)
	}
	select {
	case c := <-accepted:
		t.Fatalf("the refused connection reached the server: %v", c.RemoteAddr())
	default:
	}
	_ = held.Close()
	_ = first.Close()
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after the first closed was not accepted: the place was not given back")
	}
}
