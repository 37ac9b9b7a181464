// Package mcpfront is the MCP wire of the api: it serves /mcp for both
// protocol revisions, 2026-07-28 (stateless, tasks as the
// io.modelcontextprotocol/tasks extension) and 2025-11-25 (initialize,
// sessions kept in the store, experimental tasks), validates headers, _meta
// and tool arguments, and turns tools/call into a task through the producer.
// It holds no per-task state: every answer comes from the store, so any
// replica serves any request.
package mcpfront

import (
	"bytes"
	"cmp"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/vocab"
	"github.com/mcpqueue/mcpqueue/webhook"
)

// Config tunes the front end. A nil Config is valid.
type Config struct {
	// Name and Version are reported as serverInfo.
	Name, Version string
	// Instructions are returned by server/discover.
	Instructions string
	// AllowedHosts are the Host header values (without port) accepted; the
	// default is loopback names only (DNS-rebinding protection).
	AllowedHosts []string
	// AllowedOrigins are Origin values accepted besides loopback origins.
	AllowedOrigins []string
	// HandleAfter bounds how long a tool call whose client waits inline (a
	// client that did not negotiate tasks, or a tool that never runs as a
	// task) waits for its result. Past it the call is handed over, never
	// cancelled: the client gets an ordinary CallToolResult whose
	// structuredContent is {taskId, status, pollAfterMs} and whose text says
	// how to go on (the mirror tool tasks_result, or tasks/get), and the task
	// runs on (mirror.go). Default 30s. A call that cannot be handed over
	// (prompts/get, resources/read, completion/complete, or a tool call of a
	// client without tasks while MirrorToolsOff) is cancelled past it.
	HandleAfter time.Duration
	// MirrorToolsOff stops listing and serving the mirror tools tasks_result
	// and tasks_cancel, which clients that did not negotiate tasks are
	// otherwise shown.
	MirrorToolsOff bool
	// InlineWait bounds how long a task-capable call of a short tool waits
	// for its task to finish before the task handle is handed out (see
	// inline.go). Default 30ms; negative: never wait.
	InlineWait time.Duration
	// BodyTimeout bounds how long a request's body may take to arrive once
	// its headers have (a client that trickles a large body is cut off with
	// 408). Default 30s.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a response: a JSON reply, and each
	// event of a stream (whose keep-alives keep an idle stream writing). A
	// client that stops reading is cut off. Default 30s.
	WriteTimeout time.Duration
	// MaxBody bounds a request body. Default 4 MiB. A larger body is refused
	// with 413 (at once when its Content-Length says so).
	MaxBody int64
	// MaxDepth bounds how deeply a request's JSON nests (objects and arrays).
	// Default 64. A deeper body is refused with -32600.
	MaxDepth int
	// MaxArgs bounds params.arguments of tools/call and prompts/get, in bytes
	// as sent. Default 1 MiB. Larger arguments are refused with -32602.
	MaxArgs int64
	// MaxInputKeys bounds the answers one request carries (inputResponses of
	// tasks/update and of an MRTR retry). Default 64. More: -32602.
	MaxInputKeys int
	// RateLimit is how many requests per second each principal may send (the
	// remote address stands for an unauthenticated client), with RateBurst
	// at once. Default 0: no limit. A request over it gets HTTP 429 with
	// Retry-After: N and JSON-RPC error -32029 "overloaded, retry after N
	// s" (N the whole seconds until its next token, rounded up), on both
	// protocol eras. The buckets are per api replica: a principal spread
	// over R replicas by a load balancer may send up to R times as much.
	RateLimit float64
	// RateBurst is the token bucket's size. Default: RateLimit rounded up.
	RateBurst int
	// MaxActiveTasks caps the tasks of one owner that have not ended (calls
	// waited on inline included). Default 0: no cap. A call past it gets
	// JSON-RPC error -32029 "too many active tasks" before anything is
	// enqueued. Tasks without an owner (no authentication, 2026-07-28) are
	// not capped.
	MaxActiveTasks int
	// MaxScheduleAhead bounds how far ahead a tools/call's
	// _meta["io.mcpqueue/not-before"] may schedule it (scheduled calls,
	// issue #32 item 1; schedule.go). Default 720h (30 days).
	MaxScheduleAhead time.Duration
	// Webhooks is where completion webhooks may go (webhook.go; the api's
	// --webhook-allow). nil: webhooks are off, and a call asking for one
	// gets -32602. MaxPendingWebhooks caps one owner's pending deliveries
	// (0: no cap; past it -32029).
	Webhooks           *webhook.AllowList
	MaxPendingWebhooks int
	// MaxListenTasks bounds the task ids one subscriptions/listen request
	// subscribes to (default 64; more: -32602), and MaxListenStreams the
	// listen streams one principal (or remote address, unauthenticated) keeps
	// open on one replica (default 16; more: -32029). ListenKeepalive is how
	// often an idle listen stream carries an SSE comment (default 15s).
	// A 2025-11-25 session's GET streams count against MaxListenStreams
	// too (and at most 4 per session).
	MaxListenTasks   int
	MaxListenStreams int
	ListenKeepalive  time.Duration
	// MaxSessions caps the 2025-11-25 sessions one authenticated principal
	// keeps (not yet expired or deleted), counted in the store, so across
	// replicas. Default 0: no cap. An initialize past it gets JSON-RPC
	// error -32029 "too many sessions". Sessions without auth are not capped.
	MaxSessions int
	// MaxClientData bounds what a session keeps of its initialize: the
	// clientInfo and capabilities, in bytes as sent. Default 64 KiB. More:
	// -32602, and no session.
	MaxClientData int
	// StateKey seals MRTR requestState tokens (any length: the cipher key
	// is derived from it with HKDF-SHA256). Replicas behind one load
	// balancer must share it; when empty a random per-process key is used.
	// Changing it invalidates the states clients hold (they call again).
	StateKey []byte
	// RequestStateTTL bounds how long a requestState stays valid. Default 1h.
	RequestStateTTL time.Duration
	// ResultMemory bounds the bytes of stored results read whole at once,
	// by all requests together (default DefaultResultMemory, 64 MiB). Plain results stream from
	// the store and take none of it; the others (a result with its own _meta
	// or resultType) are held, and re-encoded, while their reply is written.
	// A reply that finds no room within 10 s answers -32029 with
	// data.retryAfterMs (an inline call of a task-capable client gets its
	// task handle instead).
	ResultMemory int64
	// Metrics registers the front end's counters (nil: none).
	Metrics prometheus.Registerer
	// Telemetry traces requests: a span per request, continuing the trace
	// in params._meta or the HTTP headers (nil: none). Give the producer
	// the same one, so that jobs carry the trace on to the workers.
	Telemetry *telemetry.Telemetry
	// Auth authenticates every request (nil: no authentication; tasks then
	// have no owner on 2026-07-28 and belong to their session on 2025-11-25).
	Auth auth.Authenticator
	// Logger gets the front end's log lines; Slog, when set, instead.
	// Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
	Now    func() time.Time
}

// Server is the MCP HTTP handler.
type Server struct {
	prod    *producer.Producer
	store   taskstate.Store
	catalog taskstate.Catalog
	bus     broker.Bus
	cfg     Config
	log     zerolog.Logger
	hosts   map[string]bool
	origins map[string]bool

	schemas      sync.Map           // tool name → *compiledSchema
	headerParams sync.Map           // tool name → *headerParams (headers.go)
	stateAEAD    cipher.AEAD        // seals requestState (mrtr.go)
	sessions     taskstate.Sessions // nil: the store keeps no sessions (no 2025-11-25 wire)
	requests     *prometheus.CounterVec
	rates        *rateLimits // nil: no rate limit
	listens      listenState // open subscriptions/listen streams
	// durations learns how long each tool's tasks take, for the polling
	// interval the answers suggest (poll.go).
	durations durations
	results   resultBudget // Config.ResultMemory (blob.go)
}

// count records one request by wire era and method.
func (s *Server) count(era, method string) {
	if s.requests != nil {
		s.requests.WithLabelValues(era, method).Inc()
	}
}

type compiledSchema struct {
	raw      string
	resolved *jsonschema.Resolved
	err      error
}

// New returns the front end: p starts and cancels tasks; b's Store, Catalog
// and Bus are read and watched (its Queue is p's business). The front end
// never closes b.
func New(p *producer.Producer, b backend.Backend, cfg *Config) *Server {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.Name = cmp.Or(c.Name, "mcpqueue")
	c.Version = cmp.Or(c.Version, "0.1.0")
	c.HandleAfter = cmp.Or(max(c.HandleAfter, 0), 30*time.Second)
	c.MaxScheduleAhead = cmp.Or(max(c.MaxScheduleAhead, 0), DefaultMaxScheduleAhead) // scheduled calls
	c.MaxBody = cmp.Or(max(c.MaxBody, 0), DefaultMaxBody)
	c.MaxDepth = cmp.Or(max(c.MaxDepth, 0), defaultMaxDepth)
	c.InlineWait = cmp.Or(c.InlineWait, 30*time.Millisecond)
	c.BodyTimeout = cmp.Or(max(c.BodyTimeout, 0), 30*time.Second)
	c.WriteTimeout = cmp.Or(max(c.WriteTimeout, 0), 30*time.Second)
	c.MaxArgs = cmp.Or(max(c.MaxArgs, 0), DefaultMaxArgs)
	c.MaxInputKeys = cmp.Or(max(c.MaxInputKeys, 0), defaultMaxInputKeys)
	c.MaxClientData = cmp.Or(max(c.MaxClientData, 0), defaultMaxClientData)
	c.ResultMemory = cmp.Or(max(c.ResultMemory, 0), DefaultResultMemory)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.RequestStateTTL = cmp.Or(max(c.RequestStateTTL, 0), time.Hour)
	c.Logger, c.Slog = slogzero.Logger(c.Logger, c.Slog), nil
	key := c.StateKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		c.Logger.Warn().Msg("no MRTR state key configured: using a random one; replicas behind one load balancer need a shared key (MCPQ_STATE_KEY)")
	}
	s := &Server{
		stateAEAD: newStateAEAD(key),
		prod:      p, store: b.Store, catalog: b.Catalog, bus: b.Bus, cfg: c, log: c.Logger,
		hosts: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}, origins: map[string]bool{},
		rates:   newRateLimits(c.RateLimit, c.RateBurst),
		results: newResultBudget(c.ResultMemory),
	}
	s.sessions, _ = b.Store.(taskstate.Sessions)
	if c.Metrics != nil {
		s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpq_api_requests_total",
			Help: "MCP requests by protocol era (2026-07-28 or 2025-11-25) and method: shows when the legacy wire can be retired.",
		}, []string{"era", "method"})
		c.Metrics.MustRegister(s.requests)
	}
	for _, h := range c.AllowedHosts {
		s.hosts[strings.ToLower(h)] = true
	}
	for _, o := range c.AllowedOrigins {
		s.origins[strings.ToLower(o)] = true
	}
	return s
}

// ServeHTTP implements http.Handler for the MCP endpoint.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &deadlineWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), d: s.cfg.WriteTimeout}
	// A request refused before its body is read (bad Origin, no token, 405,
	// 415, 413) is answered and its connection closed: net/http would
	// otherwise read up to 256 KiB of the body first, with no deadline, and
	// a client that declared one and never sends it would hold the
	// connection open for good.
	unread := r.ContentLength != 0
	defer func() {
		if unread {
			_ = w.rc.SetReadDeadline(time.Now())
		}
	}()
	r, ok := s.admit(w, r)
	if !ok {
		return
	}
	body, ok := s.readBody(w, rw, r)
	unread = !ok
	if !ok {
		return
	}
	req, info, ok := parseRequest(w, body, s.cfg.MaxDepth)
	if !ok {
		return
	}
	s.route(w, r, &req, &info, isLegacy(r, &req))
}

// admit answers what is refused or served before the body is read — a bad
// Origin, authentication, the rate limit, a 2025-11-25 session's DELETE and
// GET stream, another method than POST, another Content-Type than JSON, a
// declared length over MaxBody — and reports whether the request goes on
// (with the principal on its context).
func (s *Server) admit(w *deadlineWriter, r *http.Request) (*http.Request, bool) {
	if err := s.checkOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return r, false
	}
	r, ok := s.authenticate(w, r)
	if !ok || s.rateLimited(w, r) {
		return r, false
	}
	session := r.Header.Get(headerSession) != "" && s.sessions != nil
	switch {
	case r.Method == http.MethodDelete && session:
		s.deleteSession(w, r)
		return r, false
	case r.Method == http.MethodGet && session:
		s.sessionStream(w, r) // sessionstream.go
		return r, false
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusMethodNotAllowed, "method not allowed: this endpoint takes POST"))
		return r, false
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusUnsupportedMediaType, "Content-Type must be application/json"))
		return r, false
	}
	if r.ContentLength > s.cfg.MaxBody { // refused unread
		writeError(w, nil, s.tooBig())
		return r, false
	}
	return r, true
}

func (s *Server) tooBig() *rpcError {
	return errorf(vocab.CodeInvalidRequest, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBody))
}

// readBody reads the body within BodyTimeout and MaxBody, answering if it
// cannot; false then.
func (s *Server) readBody(w *deadlineWriter, rw http.ResponseWriter, r *http.Request) ([]byte, bool) {
	// The body gets BodyTimeout; the read deadline is lifted once it is
	// in, so a stream or a long inline call is not cut off.
	_ = w.rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, s.cfg.MaxBody))
	_ = w.rc.SetReadDeadline(time.Time{})
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		return bytes.TrimSpace(body), true
	case errors.As(err, &maxErr):
		writeError(w, nil, s.tooBig())
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusRequestTimeout, fmt.Sprintf("request body not received within %s", s.cfg.BodyTimeout)))
	default:
		writeError(w, nil, errorf(vocab.CodeParseError, http.StatusBadRequest, "reading body: "+err.Error()))
	}
	return nil, false
}

// parseRequest checks and decodes one JSON-RPC message (no batches),
// answering if it cannot; false then.
func parseRequest(w http.ResponseWriter, body []byte, maxDepth int) (request, bodyInfo, bool) {
	var req request
	if len(body) > 0 && body[0] == '[' {
		writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, "batch requests are not supported"))
		return req, bodyInfo{}, false
	}
	info, id, berr := checkBody(body, maxDepth) // before anything decodes it
	if berr != nil {
		if len(id) > 0 && !validID(id) {
			id = nil
		}
		writeError(w, id, berr)
		return req, info, false
	}
	if !info.decodeRequest(body, &req) { // decoded from checkBody's notes (body.go), else:
		if err := json.Unmarshal(body, &req); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) { // valid JSON, not a JSON-RPC message
				writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, fmt.Sprintf("invalid request: %q has the wrong type", typeErr.Field)))
			} else {
				writeError(w, nil, errorf(vocab.CodeParseError, http.StatusBadRequest, "parse error: "+err.Error()))
			}
			return req, info, false
		}
	}
	if req.JSONRPC != "2.0" {
		writeError(w, req.ID, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, `invalid request: "jsonrpc" must be "2.0"`))
		return req, info, false
	}
	return req, info, true
}

// route hands a parsed message to its era's server (legacy: 2025-11-25),
// after the checks every request passes; a notification or a response
// that is not an answer to an input request is accepted with 202.
func (s *Server) route(w *deadlineWriter, r *http.Request, req *request, info *bodyInfo, legacy bool) {
	if req.isResponse() && legacy {
		s.serveLegacy(w, r, req) // a client's answer to an input request
		return
	}
	if req.isResponse() || req.isNotification() {
		if legacy && r.Header.Get(headerSession) != "" && s.sessions != nil {
			if _, rerr := s.sessionOf(r); rerr != nil {
				writeError(w, nil, rerr)
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rerr := checkCall(r, req); rerr != nil {
		id := req.ID
		if len(id) > 0 && !validID(id) {
			id = nil // not echoed: it is not an id
		}
		writeError(w, id, rerr)
		return
	}
	if rerr := s.checkSizes(req.Method, info); rerr != nil {
		writeError(w, req.ID, rerr)
		return
	}
	r, endSpan := s.cfg.Telemetry.TraceRequest(r, req.Method, req.Params)
	defer endSpan()
	if legacy {
		s.serveLegacy(w, r, req)
		return
	}
	s.serveModern(w, r, req)
}

// checkCall refuses a request without a valid id and a method, or one
// whose Accept rules out the answers.
func checkCall(r *http.Request, req *request) *rpcError {
	switch {
	case len(req.ID) > 0 && !validID(req.ID):
		return errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, "invalid request: the id must be a string or a number")
	case req.Method == "" || len(req.ID) == 0:
		return errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, "invalid request: needs a string or number id and a method")
	case !acceptsJSON(r):
		return errorf(vocab.CodeInvalidRequest, http.StatusNotAcceptable, "Accept must allow application/json and text/event-stream")
	}
	return nil
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":` + strconv.Itoa(vocab.CodeInternalError) + `,"message":"encoding response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	if raw, ok := result.(json.RawMessage); ok && len(id) > 0 {
		writeRaw(w, id, raw) // encoded already (wire.go)
		return
	}
	writeJSON(w, http.StatusOK, response{JSONRPC: "2.0", ID: id, Result: result})
}

func writeError(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeJSON(w, e.httpStatus(), response{JSONRPC: "2.0", ID: id, Error: e.wire()})
}

// compiledFor resolves (once per schema text) a tool's input schema.
func (s *Server) compiledFor(t *taskstate.ToolInfo) (*jsonschema.Resolved, error) {
	if v, ok := s.schemas.Load(t.Name); ok {
		c := v.(*compiledSchema)
		if c.raw == string(t.InputSchema) {
			return c.resolved, c.err
		}
	}
	c := &compiledSchema{raw: string(t.InputSchema)}
	var sch jsonschema.Schema
	if err := json.Unmarshal(t.InputSchema, &sch); err != nil {
		c.err = fmt.Errorf("tool %q publishes an unreadable input schema: %w", t.Name, err)
	} else {
		c.resolved, c.err = sch.Resolve(nil)
	}
	s.schemas.Store(t.Name, c)
	return c.resolved, c.err
}

// validateArgs checks arguments against the tool's input schema.
func (s *Server) validateArgs(t *taskstate.ToolInfo, args json.RawMessage) error {
	rs, err := s.compiledFor(t)
	if err != nil {
		s.log.Error().Err(err).Str("tool", t.Name).Msg("cannot compile input schema; skipping validation")
		return nil
	}
	var v any = map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &v); err != nil {
			return err
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("arguments must be a JSON object")
	}
	return rs.Validate(v)
}

// detach keeps values but not cancellation: bookkeeping after the client left.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// maxEcho bounds a caller's identifier (task id, tool or method name) echoed
// in an error message: a 10 KB id is not sent back whole.
const maxEcho = 64

// clip is s as an error message echoes it: at most maxEcho bytes (cut at a
// character boundary), then "…".
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// deadlineWriter gives every write of a response WriteTimeout to complete
// (where the connection allows deadlines), so a client that stops reading
// cannot hold a connection and its goroutine: a reply is one write, a
// stream one per event or keep-alive.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
