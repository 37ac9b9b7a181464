package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
)

// server is an mcpqueue api and worker in this process: the real front
// end (mcpfront), producer and worker (consumer) over the in-memory queue,
// bus and store, behind an httptest server. The examples and tests call it
// as they would a deployed api.
type server struct {
	URL   string
	store *memstate.Store
	hs    *httptest.Server
	stop  func()
	done  chan error
}

// serverConfig tunes a server: the front end's config, and the poll
// interval its tasks suggest.
type serverConfig struct {
	front mcpfront.Config
	poll  time.Duration
}

// startServer runs the handlers of mux and returns once the front end lists
// every one of them.
func startServer(mux *consumer.Mux, opts ...func(*serverConfig)) (*server, error) {
	cfg := serverConfig{
		front: mcpfront.Config{Name: "memserver", Version: "1", InlineWait: -1, StateKey: []byte("client-test")},
		poll:  20 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	queue, bus, store := membroker.NewQueue(nil), membroker.NewBus(), memstate.New(nil)
	w := consumer.New(backend.Backend{Queue: queue, Store: store, Catalog: store, Bus: bus}, &consumer.Config{ID: "memworker", Concurrency: 16, ShutdownGrace: 100 * time.Millisecond, ParkAfter: -1})
	ctx, stop := context.WithCancel(context.Background())
	s := &server{store: store, stop: stop, done: make(chan error, 1)}
	go func() { s.done <- w.Run(ctx, mux) }()
	prod := producer.New(store, producer.QueueExecutor{Queue: queue, Bus: bus}, &producer.Config{PollInterval: cfg.poll})
	s.hs = httptest.NewServer(mcpfront.New(prod, backend.Backend{Store: store, Catalog: store, Bus: bus}, &cfg.front))
	s.URL = s.hs.URL + "/mcp"
	deadline := time.Now().Add(10 * time.Second)
	for _, tool := range mux.Tools() {
		for {
			if _, err := store.Tool(ctx, tool.Key()); err == nil {
				break
			}
			if time.Now().After(deadline) {
				s.Close()
				return nil, fmt.Errorf("the catalog never listed %s", tool.Key())
			}
			time.Sleep(5 * time.Millisecond) // the catalog offers no event for this
		}
	}
	return s, nil
}

// Close stops the server and its worker.
func (s *server) Close() {
	s.hs.Close()
	s.stop()
	if err := <-s.done; err != nil {
		log.Printf("the worker stopped: %v", err)
	}
}

// tokens authenticates "Bearer <name>" as the principal name.
type tokens struct{}

func (tokens) Authenticate(r *http.Request) (auth.Principal, error) {
	name, ok := bytes.CutPrefix([]byte(r.Header.Get("Authorization")), []byte("Bearer "))
	if !ok || len(name) == 0 {
		return auth.Principal{}, fmt.Errorf("%w: no bearer token", auth.ErrUnauthenticated)
	}
	return auth.Principal{Issuer: "test", Subject: string(name)}, nil
}

// exchange is one request seen by a proxy.
type exchange struct {
	at      time.Time
	method  string // JSON-RPC method ("" for a response the client sent)
	header  http.Header
	params  map[string]json.RawMessage
	result  map[string]json.RawMessage // of a JSON answer
	dropped bool
}

// proxy passes requests to a server and records them; drop, when set,
// is asked about each request and may make the proxy answer it itself
// (status) or cut the connection after the server answered (cut).
type proxy struct {
	URL  string
	hs   *httptest.Server
	rp   *httputil.ReverseProxy
	to   string
	drop func(method string, n int) (status int, cut bool)

	mu   sync.Mutex
	seen []*exchange
	n    map[string]int
}

func newProxy(target string) *proxy {
	u, _ := url.Parse(target)
	p := &proxy{to: target, n: map[string]int{}}
	p.rp = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	p.rp.FlushInterval = -1
	p.hs = httptest.NewServer(p)
	p.URL = p.hs.URL + u.Path
	return p
}

func (p *proxy) Close() { p.hs.Close() }

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	e := &exchange{at: time.Now(), method: m.Method, header: r.Header.Clone(), params: m.Params}
	p.mu.Lock()
	p.seen = append(p.seen, e)
	p.n[m.Method]++
	n := p.n[m.Method]
	p.mu.Unlock()
	status, cut := 0, false
	if p.drop != nil {
		status, cut = p.drop(m.Method, n)
	}
	if status != 0 {
		e.dropped = true
		w.Header().Set("Retry-After", "0")
		http.Error(w, "proxy says no", status)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !cut && m.Method != "tasks/get" {
		p.rp.ServeHTTP(w, r)
		return
	}
	// Forward, read the whole answer, then answer or cut the connection.
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	if cut {
		e.dropped = true
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	var out struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	p.mu.Lock()
	e.result = out.Result
	p.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// calls returns the exchanges of method, in order.
func (p *proxy) calls(method string) []*exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*exchange
	for _, e := range p.seen {
		if e.method == method {
			out = append(out, e)
		}
	}
	return out
}

// metaKey is the idempotency key in an exchange's _meta.
func (e *exchange) metaKey() string {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(e.params["_meta"], &meta)
	var k string
	_ = json.Unmarshal(meta["io.mcpqueue/idempotency-key"], &k)
	return k
}

var errNotYet = errors.New("not yet")

// eventually polls cond every 10 ms until it returns nil or within passes.
func eventually(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
