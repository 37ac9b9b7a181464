// Package natstest runs an embedded NATS server with JetStream for tests.
//
// Each Start gives a server on a random loopback port with its own temporary
// store directory, shut down when the test ends. Tests that share a server
// (parallel subtests of one contract suite) keep apart by naming every
// stream, bucket and subject with Name, which never repeats within a process.
package natstest

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long Start waits for the server to accept clients.
const readyTimeout = 10 * time.Second

// Server is a running embedded NATS server.
type Server struct {
	srv *server.Server
}

// Start runs a JetStream-enabled server on 127.0.0.1 with a random port and
// file storage in t.TempDir(). It fails the test if the server does not come
// up, and shuts it down in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, nil)
}

// StartWith is Start with the server's options changed by configure first
// (authentication, TLS); nil changes nothing.
func StartWith(t testing.TB, configure func(*server.Options)) *Server {
	t.Helper()
	dir := t.TempDir() // registered first, so removed after shutdown
	opts := &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       -1, // random free port
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
		// No HTTP monitor, cluster, gateway or leaf listeners.
	}
	if configure != nil {
		configure(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	go srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(readyTimeout) {
		t.Fatalf("natstest: server not ready for connections after %s", readyTimeout)
	}
	if !srv.JetStreamEnabled() {
		t.Fatalf("natstest: JetStream did not start")
	}
	return &Server{srv: srv}
}

// URL is the client URL, e.g. nats://127.0.0.1:41234.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Server returns the embedded server for tests that need to poke at it.
func (s *Server) Server() *server.Server { return s.srv }

// Connect opens a client connection and a JetStream context on it; the
// connection is closed in t.Cleanup. Each call is a separate connection.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL(),
		nats.Name(t.Name()),
		nats.MaxReconnects(0), // the server never restarts under a test
	)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", s.URL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

var seq atomic.Uint64

// Name returns a name no other call in this process returns: a short,
// readable piece of the test name, a counter and a random suffix. It uses
// only [A-Za-z0-9_], so it is valid as a stream name, a KV bucket name and a
// subject token (use it as a prefix: Name(t)+"_jobs", Name(t)+".bus").
func Name(t testing.TB) string {
	base := t.Name()
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	var b strings.Builder
	for _, r := range base {
		if b.Len() >= 20 {
			break
		}
		if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		b.WriteString("t")
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s_%d_%x", b.String(), seq.Add(1), rnd)
}
