package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// The protocol revisions a Client speaks (WithVersion).
const (
	Version2026 = mcpwire.Version20260728
	Version2025 = mcpwire.Version20251125
)

const (
	tasksExt    = mcpwire.TasksExtension
	metaVersion = mcpwire.MetaProtocolVersion
	metaCaps    = mcpwire.MetaClientCapabilities
	metaInfo    = mcpwire.MetaClientInfo
	metaRelated = mcpwire.MetaRelatedTask
	// MetaIdempotencyKey is the _meta key that carries a call's idempotency
	// key (the header Idempotency-Key carries it too).
	MetaIdempotencyKey = "io.mcpqueue/idempotency-key"
	maxMRTRRounds      = 16
)

var (
	// ErrCancelled is returned for a task that ended cancelled.
	ErrCancelled = errors.New("client: the task was cancelled")
	// ErrNoInputHandler is returned when the server asks for input and the
	// client has no InputHandler.
	ErrNoInputHandler = errors.New("client: the server asked for input and no input handler is set (WithInputHandler)")
)

// TokenSource returns the bearer token for a request; it is called before
// every request (cache in it what may be cached). "" sends none.
type TokenSource func(ctx context.Context) (string, error)

// clientInfo names the client to the server.
type clientInfo = mcpwire.Implementation

// Option configures a Client (New).
type Option func(*options)

type options struct {
	http      *http.Client
	input     InputHandler
	token     TokenSource
	retries   int
	pollFloor time.Duration
	noTasks   bool
	version   string
	info      clientInfo
}

// WithInputHandler answers the server's input requests (elicitation,
// sampling, roots) with h. Without one the client declares none of those
// capabilities.
func WithInputHandler(h InputHandler) Option { return func(o *options) { o.input = h } }

// WithTokenSource sends "Authorization: Bearer <token>" with every request.
func WithTokenSource(ts TokenSource) Option { return func(o *options) { o.token = ts } }

// WithRetries sets how many times a request that failed in transit
// (connection error, HTTP 429, 502, 503 or 504) is sent again, with the same
// idempotency key, backing off from 100 ms to 2 s (or the server's
// Retry-After). Default 3; 0 sends once.
func WithRetries(n int) Option { return func(o *options) { o.retries = n } }

// WithPollFloor is the shortest wait between two polls of a task, whatever
// pollIntervalMs the server asks for. Default 100 ms.
func WithPollFloor(d time.Duration) Option { return func(o *options) { o.pollFloor = d } }

// WithoutTasks calls every tool inline, never as a task (a server's
// hand-over is still followed to the result).
func WithoutTasks() Option { return func(o *options) { o.noTasks = true } }

// WithVersion fixes the protocol revision, Version2026 or Version2025,
// instead of asking the server.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithHTTPClient sends requests with hc (default: a client without
// timeout, since an inline call lasts as long as its tool).
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.http = hc } }

// WithClientInfo names the client (default "mcpqueue-go-client", "1").
func WithClientInfo(name, version string) Option {
	return func(o *options) { o.info = clientInfo{Name: name, Version: version} }
}

// Client calls the tools of one MCP endpoint. It is safe for concurrent use.
type Client struct {
	url    string
	o      options
	nextID atomic.Int64

	mu    sync.Mutex // held while negotiating
	era   string     // negotiated revision, "" until then
	tasks bool       // the server offers tasks on era

	state   sync.Mutex
	session string                   // 2025: Mcp-Session-Id
	support map[string]string        // 2025: tool → execution.taskSupport
	params  map[string][]headerParam // 2026: tool → its parameter headers (params.go)
}

// New returns a client of the MCP endpoint at rawURL (e.g.
// http://127.0.0.1:8080/mcp). It does no I/O.
func New(rawURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: url %q: want an absolute http or https URL", rawURL)
	}
	c := &Client{url: rawURL, o: options{
		http: &http.Client{}, retries: 3, pollFloor: 100 * time.Millisecond,
		info: clientInfo{Name: "mcpqueue-go-client", Version: "1"},
	}}
	for _, opt := range opts {
		opt(&c.o)
	}
	switch {
	case c.o.version != "" && c.o.version != Version2026 && c.o.version != Version2025:
		return nil, fmt.Errorf("client: WithVersion(%q): want %q or %q", c.o.version, Version2026, Version2025)
	case c.o.retries < 0:
		return nil, fmt.Errorf("client: WithRetries(%d): want 0 or more", c.o.retries)
	case c.o.pollFloor < 0:
		return nil, fmt.Errorf("client: WithPollFloor(%s): want 0 or more", c.o.pollFloor)
	case c.o.http == nil:
		return nil, errors.New("client: WithHTTPClient(nil): want an *http.Client")
	case c.o.info.Name == "":
		return nil, errors.New("client: WithClientInfo: the name is empty")
	}
	return c, nil
}

// CallOption configures one call (Call, Start).
type CallOption func(*callOptions)

type callOptions struct{ key string }

// WithKey sets the call's idempotency key instead of a fresh random one:
// the same key for the same call, made again (say after a crash), lets a
// server that honours keys answer with the task it already runs.
func WithKey(key string) CallOption { return func(o *callOptions) { o.key = key } }

// Call runs tool with args (encoded as JSON; nil sends {}) and returns its
// result: as a task where the server offers tasks, inline otherwise. If ctx
// ends first, the task is cancelled and ctx's error returned; so is a task
// Call gives up on for any other reason (an input request it cannot
// answer, a server that stopped answering): Call leaves no task behind.
func (c *Client) Call(ctx context.Context, tool string, args any, opts ...CallOption) (*Result, error) {
	t, err := c.Start(ctx, tool, args, opts...)
	if err != nil {
		return nil, err
	}
	res, err := t.Wait(ctx)
	if err != nil && !t.done {
		_ = t.cancelDetached(ctx)
	}
	return res, err
}

// Start starts tool with args and returns its task without waiting for the
// result. A server that answers at once (inline, or a task that finished
// within its inline wait) returns a Task that is already done, whose ID is
// "". Start never cancels: when ctx ends the request is abandoned, and a
// task already created runs on.
func (c *Client) Start(ctx context.Context, tool string, args any, opts ...CallOption) (*Task, error) {
	if tool == "" {
		return nil, errors.New("client: Start: the tool name is empty")
	}
	var co callOptions
	for _, o := range opts {
		o(&co)
	}
	if co.key == "" {
		co.key = newKey()
	} else if err := checkKey(co.key); err != nil {
		return nil, err
	}
	rawArgs := json.RawMessage("{}")
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the arguments of %s: %w", tool, err)
		}
		rawArgs = b
	}
	era, tasks, err := c.negotiate(ctx)
	if err != nil {
		return nil, err
	}
	if era == Version2026 {
		return c.start2026(ctx, tool, rawArgs, co.key, tasks && !c.o.noTasks)
	}
	return c.start2025(ctx, era, tool, rawArgs, co.key, tasks && !c.o.noTasks)
}

// Resume returns the task with id (from Task.ID, kept across a restart),
// after reading it once, so Wait or Cancel can follow it. On the 2025-11-25
// wire without authentication a task belongs to the session that created
// it: only the Client that started it can resume it.
func (c *Client) Resume(ctx context.Context, taskID string) (*Task, error) {
	if taskID == "" {
		return nil, errors.New("client: Resume: the task id is empty")
	}
	era, _, err := c.negotiate(ctx)
	if err != nil {
		return nil, err
	}
	t := &Task{c: c, id: taskID, era: era, answered: map[string]bool{}}
	if _, err := t.get(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Tools lists the server's tools (every page).
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	era, _, err := c.negotiate(ctx)
	if err != nil {
		return nil, err
	}
	return c.listTools(ctx, era)
}

func (c *Client) listTools(ctx context.Context, era string) ([]Tool, error) {
	var out []Tool
	cursor := ""
	for page := 0; page < 1000; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := c.call(ctx, c.request(era, "tools/list", "", params, "", false))
		if err != nil {
			return nil, err
		}
		var res mcpwire.ListToolsResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("client: tools/list: %w", err)
		}
		for _, t := range res.Tools {
			out = append(out, Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
				OutputSchema: t.OutputSchema, Annotations: t.Annotations, TaskSupport: t.TaskSupport()})
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if era != Version2026 {
		c.state.Lock()
		c.support = map[string]string{}
		for _, t := range out {
			c.support[t.Name] = t.TaskSupport
		}
		c.state.Unlock()
	}
	return out, nil
}

// request builds a request of era; on 2026-07-28 params get the _meta
// every request carries (ext: declaring the tasks extension) and key, when
// set, joins it.
func (c *Client) request(era, method, name string, params map[string]any, key string, ext bool) *rpc {
	meta := map[string]any{}
	if era == Version2026 {
		meta[metaVersion], meta[metaCaps], meta[metaInfo] = Version2026, c.capabilities(ext), c.o.info
	}
	if key != "" {
		meta[MetaIdempotencyKey] = key
	}
	if len(meta) > 0 {
		if params == nil {
			params = map[string]any{}
		}
		params["_meta"] = meta
	}
	return &rpc{era: era, method: method, name: name, params: params, key: key}
}

// capabilities are the client's: elicitation, sampling and roots with an
// input handler, the tasks extension (2026-07-28) with ext.
func (c *Client) capabilities(ext bool) *mcpwire.ClientCapabilities {
	caps := &mcpwire.ClientCapabilities{}
	if c.o.input != nil {
		caps.Elicitation, caps.Sampling, caps.Roots = mcpwire.Empty, mcpwire.Empty, mcpwire.Empty
	}
	if ext {
		caps.Extensions = map[string]json.RawMessage{tasksExt: mcpwire.Empty}
	}
	return caps
}

// negotiate finds out, once, which revision the server speaks and whether
// it offers tasks: server/discover (2026-07-28), and initialize (2025)
// when the server does not know it.
func (c *Client) negotiate(ctx context.Context) (era string, tasks bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.era != "" {
		return c.era, c.tasks, nil
	}
	if c.o.version != Version2025 {
		raw, err := c.call(ctx, c.request(Version2026, "server/discover", "", nil, "", true))
		if err == nil {
			var d mcpwire.DiscoverResult
			if err := json.Unmarshal(raw, &d); err != nil {
				return "", false, fmt.Errorf("client: server/discover: %w", err)
			}
			_, c.tasks = d.Capabilities.Extensions[tasksExt]
			c.era = Version2026
			return c.era, c.tasks, nil
		}
		var e *Error
		if c.o.version == Version2026 || !errors.As(err, &e) || e.HTTPStatus == http.StatusUnauthorized || e.HTTPStatus == http.StatusForbidden {
			return "", false, fmt.Errorf("client: server/discover: %w", err)
		}
		// Any other answer but a result: a server of the 2025 revisions.
	}
	return c.initialize(ctx)
}

// renegotiate opens a new session in place of gone (unless another call
// did already).
func (c *Client) renegotiate(ctx context.Context, gone string) error {
	c.mu.Lock()
	if c.sessionID() == gone {
		c.era = ""
		c.setSession("")
	}
	c.mu.Unlock()
	_, _, err := c.negotiate(ctx)
	return err
}

func (c *Client) sessionID() string {
	c.state.Lock()
	defer c.state.Unlock()
	return c.session
}

func (c *Client) setSession(id string) {
	c.state.Lock()
	defer c.state.Unlock()
	c.session = id
}

// newKey is a fresh idempotency key: 128 random bits, hex.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkKey refuses a key a header cannot carry.
func checkKey(k string) error {
	if len(k) > 255 {
		return fmt.Errorf("client: WithKey: the key is %d bytes; at most 255", len(k))
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return fmt.Errorf("client: WithKey(%q): want printable ASCII without spaces", k)
		}
	}
	return nil
}
