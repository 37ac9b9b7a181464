package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// HTTPServer is a remote MCP server speaking the Streamable-HTTP transport:
// every message the bridge sends is a POST to URL, and the server answers
// with a JSON body or an SSE stream.
type HTTPServer struct {
	// URL is the server's MCP endpoint (http or https).
	URL string
	// Headers are sent on every request (e.g. Authorization). Their
	// values are never logged.
	Headers map[string]string
	// Client is the HTTP client (nil: a client without an overall
	// timeout, since calls may run long).
	Client *http.Client
	// Protocol is the upstream's era (task gateway): ProtocolLegacy
	// (initialize, a session), ProtocolModern (2026-07-28 per-request
	// framing, upstream tasks followed), or ProtocolAuto: server/discover
	// is tried first and initialize if the server does not answer it.
	Protocol string
	// OAuth, when set, is the OAuth client-credentials grant whose bearer
	// token every request carries (task gateway; oauth.go).
	OAuth *OAuth
	// ForwardIdentity, when set, names a header that carries the task
	// owner's subject (the authenticated principal that created the task)
	// on the requests of its call.
	ForwardIdentity string
}

// CheckURL reports whether raw is an absolute http or https URL.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bridge: bad URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bridge: bad URL %q: want an absolute http:// or https:// URL", raw)
	}
	return nil
}

// Dialer opens one Streamable-HTTP session per call of the Dialer.
// The sessions share one HTTP client (and one OAuth token).
func (h HTTPServer) Dialer(log zerolog.Logger) Dialer {
	h.Client = h.client()
	return func(ctx context.Context) (Conn, error) { return h.open(log) }
}

// redacted is the URL as logged and in errors: no user info, no query.
func (h HTTPServer) redacted() string { return redactURL(h.URL) }

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// host is the URL's host, a server's name in the log until it names itself.
func (h HTTPServer) host() string {
	if u, err := url.Parse(h.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return "(bad URL)"
}

// httpConn is one Streamable-HTTP session: a Conn whose Read returns what
// the server sent in answer to the POSTs (and on the GET stream), in the
// order each stream carried it.
type httpConn struct {
	h      HTTPServer
	client *http.Client
	log    zerolog.Logger
	where  string // redacted URL

	ctx    context.Context // ends every request once the Conn ends
	cancel context.CancelFunc
	in     chan []byte

	mu       sync.Mutex
	session  string // Mcp-Session-Id
	version  string // negotiated protocol version, once initialize is answered
	initID   string // the initialize request's id
	getOnce  bool
	closing  bool
	done     chan struct{}
	cause    error
	inflight sync.WaitGroup

	// 2026-07-28 (modern.go): set by initialize on a modern server.
	modern     bool
	clientCaps json.RawMessage // the _meta clientCapabilities of each request
	clientInfo json.RawMessage
	logLevel   string
	calls      map[string]*modernCall   // the session's requests running, by id
	asks       map[string]chan *message // input requests handed to the session, by id
	nextAsk    int
	nextPost   int

	identity string // the running call's owner (HTTPServer.ForwardIdentity)
}

// forward sets the identity the requests of the running call forward
// ("" between calls).
func (c *httpConn) forward(owner string) {
	c.mu.Lock()
	c.identity = owner
	c.mu.Unlock()
}

func (h HTTPServer) open(log zerolog.Logger) (*httpConn, error) {
	if err := CheckURL(h.URL); err != nil {
		return nil, err
	}
	c := &httpConn{h: h, client: h.Client, log: log, where: h.redacted(), in: make(chan []byte, 64), done: make(chan struct{}),
		calls: map[string]*modernCall{}, asks: map[string]chan *message{}}
	if c.client == nil {
		c.client = &http.Client{}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	names := make([]string, 0, len(h.Headers))
	for k := range h.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	log.Info().Str("url", c.where).Strs("headers", names).Bool("oauth", h.OAuth != nil).Msg("mcp server session opening (streamable http)")
	return c, nil
}

// Read returns the next message the server sent, or the reason the Conn
// ended.
func (c *httpConn) Read() ([]byte, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.done:
		return nil, c.Exit()
	}
}

// Exit is why the session ended (the HTTP cause).
func (c *httpConn) Exit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause == nil {
		return errors.New("streamable http session still open")
	}
	return c.cause
}

// fail ends the Conn with err (the first cause wins).
func (c *httpConn) fail(err error) {
	c.mu.Lock()
	if c.cause != nil {
		c.mu.Unlock()
		return
	}
	if c.closing {
		err = fmt.Errorf("%s: closed by the bridge", c.where)
	}
	c.cause = err
	c.mu.Unlock()
	c.cancel()
	close(c.done)
}

// peek is what Write needs to know of a message.
type peek struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
}

// Write POSTs one message. A request's answer is read in the background
// (the call may run long); a notification or response must be accepted.
func (c *httpConn) Write(msg []byte) error {
	var p peek
	if err := json.Unmarshal(msg, &p); err != nil {
		return fmt.Errorf("bridge: http: undecodable message: %w", err)
	}
	select {
	case <-c.done:
		return c.Exit()
	default:
	}
	if p.Method == "initialize" {
		c.mu.Lock()
		c.initID = string(p.ID)
		c.mu.Unlock()
		c.background(func() error { return c.initialize(msg, p) })
		return nil
	}
	if c.isModern() {
		return c.writeModern(msg, p)
	}
	if p.Method != "" && len(p.ID) > 0 { // a request
		c.background(func() error { return c.post(msg, p) })
		return nil
	}
	if err := c.post(msg, p); err != nil {
		c.fail(err)
		return err
	}
	if p.Method == "notifications/initialized" {
		c.startGet()
	}
	return nil
}

// background runs f beside the session; its error ends the Conn.
func (c *httpConn) background(f func() error) {
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		if err := f(); err != nil {
			c.fail(err)
		}
	}()
}

// header sets the headers every request carries.
func (c *httpConn) header(req *http.Request, accept string) {
	for k, v := range c.h.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", accept)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h.ForwardIdentity != "" && c.identity != "" {
		req.Header.Set(c.h.ForwardIdentity, c.identity)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
}

// post sends msg and delivers what the server answers.
func (c *httpConn) post(msg []byte, p peek) error {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.h.URL, bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("POST %s: %w", c.where, err)
	}
	c.header(req, "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s (%s): %w", c.where, what(p), unwrapURL(err))
	}
	defer resp.Body.Close()
	if err := c.status(resp, "POST", p); err != nil {
		return err
	}
	if p.Method == "initialize" {
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			c.mu.Lock()
			c.session = id
			c.mu.Unlock()
		}
	}
	if resp.StatusCode == http.StatusAccepted || len(p.ID) == 0 || p.Method == "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil // a notification or response: nothing comes back
	}
	raw, err := c.read(resp, p)
	if err != nil {
		return err
	}
	c.push(raw)
	return nil
}

// status turns an HTTP error into the Conn's end.
func (c *httpConn) status(resp *http.Response, method string, p peek) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := fmt.Sprintf("%s %s (%s): HTTP %s", method, c.where, what(p), resp.Status)
	if resp.StatusCode == http.StatusNotFound && c.sessionID() != "" {
		msg += " (the server ended the session)"
	}
	if b := strings.TrimSpace(string(body)); b != "" {
		msg += ": " + clip([]byte(b))
	}
	return errors.New(msg)
}

func (c *httpConn) sessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// read returns a request's answer: a JSON body, or the response on an SSE
// stream that must carry it (what else the stream carries is delivered).
func (c *httpConn) read(resp *http.Response, p peek) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxMessage+1))
		if err != nil {
			return nil, fmt.Errorf("POST %s (%s): reading the answer: %w", c.where, what(p), unwrapURL(err))
		}
		if len(body) > MaxMessage {
			return nil, fmt.Errorf("POST %s (%s): an answer longer than %d bytes", c.where, what(p), MaxMessage)
		}
		return body, nil
	case "text/event-stream":
		var answer []byte
		err := c.events(resp.Body, func(data []byte) bool {
			if answer == nil && bytes.Equal(idOf(data), p.ID) {
				answer = data
				return true
			}
			return false
		})
		if answer != nil {
			return answer, nil
		}
		if err == nil {
			err = errors.New("stream ended")
		}
		if ctxErr := resp.Request.Context().Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, fmt.Errorf("POST %s (%s): the server's event stream ended before it answered: %w", c.where, what(p), unwrapURL(err))
	default:
		return nil, fmt.Errorf("POST %s (%s): answer of content type %q (want application/json or text/event-stream)", c.where, what(p), ct)
	}
}

// events reads an SSE stream, delivering each event's data (a JSON-RPC
// message) in order, until seen keeps one (the answer a POST waits for).
func (c *httpConn) events(body io.Reader, seen func([]byte) bool) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), MaxMessage)
	var data []byte
	event := ""
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 && (event == "" || event == "message") {
				msg := append([]byte(nil), data...)
				if seen(msg) {
					return nil
				}
				c.push(msg)
			}
			data, event = data[:0], ""
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case "event":
			event = string(value)
		}
	}
	return sc.Err()
}

// push hands a message to Read; the negotiated protocol version is taken
// from initialize's answer before the session sees it.
func (c *httpConn) push(msg []byte) {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 {
		return
	}
	if msg[0] == '[' { // a batch
		var batch []json.RawMessage
		if json.Unmarshal(msg, &batch) == nil {
			for _, m := range batch {
				c.push(m)
			}
			return
		}
	}
	c.mu.Lock()
	if c.initID != "" && c.version == "" {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &r) == nil && string(r.ID) == c.initID {
			c.version = r.Result.ProtocolVersion
		}
	}
	c.mu.Unlock()
	select {
	case c.in <- msg:
	case <-c.done:
	}
}

// startGet opens the GET stream for what the server sends outside a
// request (list_changed); a server that refuses it (405) has none.
func (c *httpConn) startGet() {
	c.mu.Lock()
	started := c.getOnce
	c.getOnce = true
	c.mu.Unlock()
	if started {
		return
	}
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.h.URL, nil)
		if err != nil {
			return
		}
		c.header(req, "text/event-stream")
		resp, err := c.client.Do(req)
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Debug().Err(unwrapURL(err)).Msg("GET stream for server notifications not opened")
			}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			c.log.Debug().Int("status", resp.StatusCode).Msg("server offers no GET stream; list changes are seen on the next session")
			return
		}
		err = c.events(resp.Body, func([]byte) bool { return false })
		if c.ctx.Err() == nil {
			c.log.Debug().AnErr("err", err).Msg("GET stream for server notifications ended")
		}
	}()
}

// Close ends the session: a DELETE tells the server, then every open
// request is abandoned.
func (c *httpConn) Close() error {
	c.mu.Lock()
	c.closing = true
	id := c.session
	c.mu.Unlock()
	if id != "" && c.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.h.URL, nil)
		if err == nil {
			c.header(req, "application/json, text/event-stream")
			if resp, err := c.client.Do(req); err == nil {
				_ = resp.Body.Close()
			} else {
				c.log.Debug().Err(unwrapURL(err)).Msg("DELETE of the session failed")
			}
		}
		cancel()
	}
	c.fail(nil)
	c.inflight.Wait()
	return nil
}

// what names a message in an error: its method, or "response".
func what(p peek) string {
	if p.Method != "" {
		return p.Method
	}
	return "response"
}

// idOf is a response's id (nil for requests and notifications).
func idOf(msg []byte) json.RawMessage {
	var p peek
	if json.Unmarshal(msg, &p) != nil || p.Method != "" {
		return nil
	}
	return p.ID
}

// unwrapURL drops *url.Error's repetition of the method and URL (which
// the caller names, redacted).
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
