package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/cli"
)

// connFlags bound the public listener's connections: how long a request's
// body and an idle keep-alive connection may take, and how many connections
// may be open, in all and from one client address.
type connFlags struct {
	bodyTimeout, writeTimeout, idleTimeout time.Duration
	maxConns, maxPerClient                 int
}

func (c *connFlags) flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.Duration(&c.bodyTimeout, "body-timeout", "MCPQ_BODY_TIMEOUT", 30*time.Second, "api: how long a request body may take to arrive after its headers; a trickled body is cut off with 408")
	e.Duration(&c.writeTimeout, "write-timeout", "MCPQ_WRITE_TIMEOUT", 30*time.Second, "api: how long each write of a response (a reply, one event of a stream) may take; a client that stops reading is cut off")
	e.Duration(&c.idleTimeout, "idle-timeout", "MCPQ_IDLE_TIMEOUT", 30*time.Second, "api: how long a keep-alive connection may sit idle between requests before the server closes it")
	e.Int(&c.maxConns, "max-conns", "MCPQ_MAX_CONNS", 8192, "api: open connections in all; more are closed at once; 0: no bound")
	e.Int(&c.maxPerClient, "max-conns-per-client", "MCPQ_MAX_CONNS_PER_CLIENT", 512, "api: open connections from one client address; more are closed at once; 0: no bound (set 0 or raise it behind a load balancer, whose address all clients share)")
}

// limitListener closes connections past a total and a per-client-address
// bound as soon as they are accepted, answering 503 first so a client
// sees why.
type limitListener struct {
	net.Listener
	total, perClient int
	log              zerolog.Logger

	mu     sync.Mutex
	open   int
	byAddr map[string]int
	warned time.Time
}

func limitConns(ln net.Listener, total, perClient int, log zerolog.Logger) net.Listener {
	if total <= 0 && perClient <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, total: total, perClient: perClient, log: log, byAddr: map[string]int{}}
}

const tooManyConns = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n\r\ntoo many connections\r\n"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		l.mu.Lock()
		refuse := l.total > 0 && l.open >= l.total || l.perClient > 0 && l.byAddr[host] >= l.perClient
		if !refuse {
			l.open++
			l.byAddr[host]++
		}
		warn := refuse && time.Since(l.warned) > 10*time.Second
		if warn {
			l.warned = time.Now()
		}
		open, fromHost := l.open, l.byAddr[host]
		l.mu.Unlock()
		if !refuse {
			return &countedConn{Conn: c, release: func() { l.release(host) }}, nil
		}
		if warn {
			l.log.Warn().Str("client", host).Int("open", open).Int("open_from_client", fromHost).
				Int("max_conns", l.total).Int("max_conns_per_client", l.perClient).Msg("connection refused: too many open (--max-conns, --max-conns-per-client)")
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte(tooManyConns))
		_ = c.Close()
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	l.open--
	if l.byAddr[host]--; l.byAddr[host] <= 0 {
		delete(l.byAddr, host)
	}
	l.mu.Unlock()
}

// countedConn gives its place back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// guardBodies bounds every request body on a listener, whatever handler
// serves it: net/http reads a body only when the handler does, and after a
// handler that left it unread (a refusal: no token, a bad Origin, 405, or a
// POST to /healthz) it reads up to 256 KiB of it before it answers, with
// no deadline of its own, so a client that declares a body and never sends
// it would hold the connection open for good. Here a request with a body
// gets a read deadline of timeout when its handler starts, lifted once the
// handler has read the body to its end (a stream, or a long inline call,
// goes on past it); a handler that returns with the body unread gets a
// deadline in the past, so its answer is sent and the connection closed at
// once, without reading what is left.
func guardBodies(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		b := &watchedBody{ReadCloser: r.Body, rc: rc}
		r.Body = b
		h.ServeHTTP(w, r)
		if !b.eof.Load() {
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// watchedBody notes when its body has been read to the end, and lifts the
// connection's read deadline then.
type watchedBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	eof atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.eof.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
