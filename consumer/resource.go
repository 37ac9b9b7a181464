package consumer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// ResourceDef describes a resource to register (named so because Resource is
// the embedded-resource content block): one URI, read by a handler
// through the queue (resources/read), listed by resources/list.
type ResourceDef struct {
	URI         string // any scheme: file:///…, test://…, app://…
	Name        string // the MCP name; default: the URI
	Title       string
	Description string
	MimeType    string
	// Size is the raw content's size in bytes, if known (0: not said).
	Size        int64
	Annotations map[string]any
	// Cache is what reads tell a 2026-07-28 client about caching them.
	Cache Cache
	// Timeout bounds one read. Zero uses the worker's default.
	Timeout time.Duration
}

// ResourceTemplate describes a family of resources named by an RFC 6570
// URI template ({name}, {+name}, {#name}; see taskstate.Template): a
// resources/read of any URI the template matches runs the handler, with the
// template's variables in ResourceRequest.Vars.
type ResourceTemplate struct {
	URITemplate string
	Name        string // the MCP name; default: the URI template
	Title       string
	Description string
	MimeType    string // only if every resource of the template has it
	Annotations map[string]any
	Cache       Cache
	Timeout     time.Duration
	// Complete, when set, answers completion/complete for the template's
	// variables (registered beside the template, routed like it).
	Complete CompleteFunc
}

// Cache is the caching hint of a resource's reads (ttlMs and cacheScope of
// the 2026-07-28 ReadResourceResult).
type Cache struct {
	// TTL is how long a client may keep a read before reading again
	// (0: re-read every time).
	TTL time.Duration
	// Public says the content is the same for every caller, so shared
	// caches may serve it across authorization contexts; by default a read
	// is "private": cached only for the caller's authorization.
	Public bool
}

func (c Cache) scope() string {
	if c.Public {
		return "public"
	}
	return "private"
}

// ResourceRequest is what a read handler gets.
type ResourceRequest struct {
	// URI is the URI read.
	URI string `json:"uri"`
	// Vars are the template's variables matched in URI (nil for a plain
	// resource).
	Vars map[string]string `json:"-"`
}

// ErrResourceNotFound is returned by a read handler to tell the client that no
// resource has the URI: JSON-RPC error -32602 "Resource not found" with the
// URI in its data (SEP-2164). A handler returning no contents gets the same.
var ErrResourceNotFound = errors.New("consumer: resource not found")

// TextContents is the contents of a text resource.
func TextContents(uri, mimeType, text string) ResourceContents {
	return ResourceContents{URI: uri, MimeType: mimeType, Text: text}
}

// BlobContents is the contents of a binary resource (base64 on the wire).
func BlobContents(uri, mimeType string, data []byte) ResourceContents {
	return ResourceContents{URI: uri, MimeType: mimeType, Blob: base64.StdEncoding.EncodeToString(data)}
}

// ReadFunc reads a resource: its contents (usually one item, with the
// request's URI), or ErrResourceNotFound.
type ReadFunc func(ctx context.Context, call *Call[ResourceRequest]) ([]ResourceContents, error)

// HandleResource registers h as the reader of resource r. Reads run through
// the queue like tool calls, always inline, so a read handler can ask the
// client for input too (MRTR). Registration mistakes panic.
func HandleResource(m *Mux, r ResourceDef, h ReadFunc) {
	if err := taskstate.CheckResourceURI(r.URI); err != nil {
		panic(fmt.Sprintf("consumer: resource: %v", err))
	}
	if r.Size < 0 {
		panic(fmt.Sprintf("consumer: resource %q: negative Size", r.URI))
	}
	registerRead(m, taskstate.ToolInfo{
		Kind: taskstate.KindResource, Name: r.URI, ResourceName: r.Name, Title: r.Title,
		Description: r.Description, MimeType: r.MimeType, Size: r.Size, Annotations: annotations(r.Annotations),
	}, r.Timeout, r.Cache, nil, h)
}

// HandleResourceTemplate registers h as the reader of every resource whose
// URI matches t.URITemplate (and t.Complete, if set, as its completion
// handler). A URI that both a resource and a template match is the
// resource's. Registration mistakes panic.
func HandleResourceTemplate(m *Mux, t ResourceTemplate, h ReadFunc) {
	tmpl, err := taskstate.ParseTemplate(t.URITemplate)
	if err != nil {
		panic(fmt.Sprintf("consumer: resource template: %v", err))
	}
	key := registerRead(m, taskstate.ToolInfo{
		Kind: taskstate.KindTemplate, Name: t.URITemplate, ResourceName: t.Name, Title: t.Title,
		Description: t.Description, MimeType: t.MimeType, Annotations: annotations(t.Annotations),
	}, t.Timeout, t.Cache, tmpl, h)
	if t.Complete != nil {
		handleCompletion(m, key, tmpl.Vars(), t.Complete)
	}
}

// registerRead adds the entry of a resource or template (info.Name its URI
// or URI template) and returns its catalog key.
func registerRead(m *Mux, info taskstate.ToolInfo, timeout time.Duration, cache Cache, tmpl *taskstate.Template, h ReadFunc) string {
	key := info.Key()
	if _, dup := m.tools[key]; dup {
		panic(fmt.Sprintf("consumer: %s %q registered twice", info.Kind, info.Name))
	}
	if timeout < 0 || cache.TTL < 0 {
		panic(fmt.Sprintf("consumer: %s %q: negative Timeout or Cache.TTL", info.Kind, info.Name))
	}
	if h == nil {
		panic(fmt.Sprintf("consumer: %s %q: no read handler", info.Kind, info.Name))
	}
	if scheme, _, _ := strings.Cut(info.Name, ":"); strings.EqualFold(scheme, "mcpq") {
		panic(fmt.Sprintf("consumer: %s %q: the mcpq: scheme is the api's own (task artifacts)", info.Kind, info.Name))
	}
	if info.ResourceName == "" {
		info.ResourceName = info.Name
	}
	info.TaskSupport, info.TimeoutMs = TaskForbidden, timeout.Milliseconds()
	m.tools[key] = &entry{
		info: info, timeout: timeout,
		run: func(ctx context.Context, cs *callState) (json.RawMessage, error) {
			return runRead(ctx, cs, cache, tmpl, h)
		},
	}
	return key
}

func annotations(a map[string]any) json.RawMessage {
	if a == nil {
		return nil
	}
	b, _ := json.Marshal(a)
	return b
}

// runRead decodes a read job ({"uri": …}), runs the handler and encodes a
// ReadResourceResult with the caching hints.
func runRead(ctx context.Context, cs *callState, cache Cache, tmpl *taskstate.Template, h ReadFunc) (json.RawMessage, error) {
	call := &Call[ResourceRequest]{callState: cs}
	if err := json.Unmarshal(cs.args, &call.Args); err != nil || call.Args.URI == "" {
		return nil, &ProtocolError{Code: -32602, Message: "invalid resources/read job: no uri"}
	}
	notFound := &ProtocolError{Code: -32602, Message: "Resource not found: " + call.Args.URI, Data: map[string]string{"uri": call.Args.URI}}
	if tmpl != nil {
		vars, ok := tmpl.Match(call.Args.URI)
		if !ok {
			return nil, notFound
		}
		call.Args.Vars = vars
	}
	contents, err := h(ctx, call)
	if errors.Is(err, ErrResourceNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if len(contents) == 0 {
		return nil, notFound // SEP-2164: never an empty contents array
	}
	for i, c := range contents {
		if c.URI == "" {
			contents[i].URI = call.Args.URI
		}
	}
	return json.Marshal(struct {
		Contents   []ResourceContents `json:"contents"`
		TTLMs      int64              `json:"ttlMs"`
		CacheScope string             `json:"cacheScope"`
	}{contents, cache.TTL.Milliseconds(), cache.scope()})
}

// ResourceUpdated tells the clients subscribed to uri that it changed
// (notifications/resources/updated, delivered by whichever api replica holds
// each subscriber's stream). Call it from anywhere — a handler, or a
// goroutine watching the data — once the Mux runs on a Worker; before that
// it returns ErrNotRunning. Delivery is best effort, like every bus signal:
// a subscriber that misses one reads the resource again when it next looks.
func (m *Mux) ResourceUpdated(ctx context.Context, uri string) error {
	if err := taskstate.CheckResourceURI(uri); err != nil {
		return fmt.Errorf("consumer: resource updated: %w", err)
	}
	bus := m.updates.get()
	if bus == nil {
		return ErrNotRunning
	}
	return publishUpdated(ctx, bus, uri)
}

// ResourceUpdated is Mux.ResourceUpdated from inside a handler.
func (c *callState) ResourceUpdated(ctx context.Context, uri string) error {
	if err := taskstate.CheckResourceURI(uri); err != nil {
		return fmt.Errorf("consumer: resource updated: %w", err)
	}
	return publishUpdated(ctx, c.w.bus, uri)
}

func publishUpdated(ctx context.Context, bus broker.Bus, uri string) error {
	b, _ := json.Marshal(map[string]string{"uri": uri})
	if err := bus.Publish(ctx, broker.TopicResource, broker.ResourceKey(uri), b); err != nil {
		return fmt.Errorf("consumer: resource updated: %w", err)
	}
	return nil
}

// ErrNotRunning is returned by Mux.ResourceUpdated before a Worker runs the Mux.
var ErrNotRunning = errors.New("consumer: the mux does not run on a worker yet")

// busCell hands a running Worker's bus to Mux.ResourceUpdated; a Mux and
// the narrowed copies Only makes of it share one.
type busCell struct {
	mu  sync.Mutex
	bus broker.Bus
}

func (b *busCell) get() broker.Bus {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bus
}

func (b *busCell) set(bus broker.Bus) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.bus = bus
	b.mu.Unlock()
}
