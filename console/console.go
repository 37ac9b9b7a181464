package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

//go:embed static
var static embed.FS

// Path is where the console is mounted.
const Path = "/console/"

// Config wires a Console. Store and Producer are required.
type Config struct {
	Store    taskstate.Store
	Producer *producer.Producer
	// Catalog tells the queue view which tools exist and whether a worker
	// serves each now (its heartbeat). Default: Store, when it is a
	// Catalog too (both stores of this module are).
	Catalog taskstate.Catalog
	// Depth, if set, is the broker's backlog per tool (jobs queued and
	// handed out), which the queue view shows to admins who see every
	// tenant: it counts every tenant's jobs.
	Depth broker.Depth
	// Authenticate, if set, identifies the caller of an API request (from
	// its bearer token); the API then answers only callers that one of
	// Admins admits (ParseAdmins). Nil leaves the API open, like an api
	// running without authentication.
	Authenticate func(r *http.Request) (Identity, error)
	Admins       []Admin
	// AllowedHosts are Host names accepted besides loopback ones, so a
	// DNS-rebinding page cannot reach a console on localhost.
	AllowedHosts []string
	// MaxTasks bounds the rows one list answer carries. Default 200.
	MaxTasks int
	// MaxScan bounds the records one list answer reads. Default 20000.
	MaxScan int
	// Heartbeat is how often an idle event stream sends a comment, so
	// proxies keep it open. Default 15s.
	Heartbeat time.Duration
	// TrackIdle is how long the console keeps following the store's change
	// feed, to note each attempt's pick-up, after its last request or the
	// close of its last event stream. Default 2m.
	TrackIdle time.Duration
	// Now is the clock of the queue view's per-minute series. Default
	// time.Now.
	Now func() time.Time
}

// Console is the http.Handler for everything under Path.
type Console struct {
	cfg   Config
	gate  *Gate
	feed  taskstate.Feed // nil if the store has none
	track *tracker
	mux   *http.ServeMux
}

// New returns the console. When the store has a change feed, the console
// follows it while in use and ctx lasts, to note when each attempt of a task
// was picked up (the record only says how many there were).
func New(ctx context.Context, cfg Config) *Console {
	if cfg.MaxTasks <= 0 {
		cfg.MaxTasks = 200
	}
	if cfg.MaxScan <= 0 {
		cfg.MaxScan = 20000
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.TrackIdle <= 0 {
		cfg.TrackIdle = trackIdle
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Catalog == nil {
		cfg.Catalog, _ = cfg.Store.(taskstate.Catalog)
	}
	c := &Console{cfg: cfg, mux: http.NewServeMux(), gate: &Gate{Authenticate: cfg.Authenticate, Admins: cfg.Admins, AllowedHosts: cfg.AllowedHosts}}
	c.feed, _ = cfg.Store.(taskstate.Feed)
	c.track = newTracker(ctx, c.feed, 10000, cfg.TrackIdle, seriesMinutes*time.Minute)
	c.track.now = cfg.Now
	page, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Path, "/"), http.FileServerFS(page))
	c.mux.Handle("GET "+Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.track.use() // the page is about to open its event stream
		files.ServeHTTP(w, r)
	}))
	c.mux.HandleFunc("GET "+Path+"api/tasks", c.guard(c.list))
	c.mux.HandleFunc("GET "+Path+"api/tasks/{id}", c.guard(c.detail))
	c.mux.HandleFunc("POST "+Path+"api/tasks/{id}/cancel", c.guard(c.cancel))
	c.mux.HandleFunc("POST "+Path+"api/tasks/{id}/replay", c.guard(c.replay)) // replay.go
	c.mux.HandleFunc("GET "+Path+"api/events", c.guard(c.events))
	c.mux.HandleFunc("GET "+Path+"api/queue", c.guard(c.queue))
	c.mux.HandleFunc("GET "+Path+"api/schedules", c.guard(c.schedules)) // recurring schedules: schedules.go
	unknown := c.guard(func(w http.ResponseWriter, r *http.Request, _ caller) {
		writeErr(w, http.StatusNotFound, "no such console API: "+r.Method+" "+r.URL.Path)
	})
	c.mux.HandleFunc("GET "+Path+"api/", unknown)
	c.mux.HandleFunc("POST "+Path+"api/", unknown)
	return c
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.gate.hostAllowed(r.Host) {
		writeErr(w, http.StatusForbidden, "host "+strconv.Quote(r.Host)+" is not allowed")
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// caller is who an admitted API call comes from and which tasks it may see.
type caller struct {
	who string // in messages: "anonymous", or the admin's tenant/subject
	// owner is the admin's owner key when it sees its own tenant's tasks
	// only; "" when it sees every task.
	owner string
}

// sees reports whether the caller may see (and cancel) t: a tenant's admin
// sees the tasks whose owner is in its issuer and tenant.
func (c caller) sees(t *taskstate.Task) bool { return c.seesOwner(t.Owner) }

// seesOwner reports whether the caller may see the tasks of owner.
func (c caller) seesOwner(owner string) bool {
	return c.owner == "" || sameTenant(c.owner, owner)
}

// global reports whether the caller sees every tenant's tasks, and so may
// see figures that count them all (the broker's depth).
func (c caller) global() bool { return c.owner == "" }

// toolError is the status the console shows for a task that completed with
// a tool error (a result with isError: true): completed to the protocol of
// 2026-07-28, failed to 2025-11-25's, and a failure to an operator.
const toolError = "tool_error"

// shown is the status the console shows for t: its status, or toolError.
func shown(t *taskstate.Task) string {
	if isToolError(t) {
		return toolError
	}
	return string(t.Status)
}

// isToolError reports whether t completed with a tool error.
func isToolError(t *taskstate.Task) bool {
	if t.Status != taskstate.Completed {
		return false
	}
	if t.ResultRef != nil {
		return t.ResultRef.IsError
	}
	if !bytes.Contains(t.Result, []byte(`"isError"`)) {
		return false // most results: no need to parse them
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(t.Result, &r) == nil && r.IsError
}

// validShown reports whether s names a status the console shows.
func validShown(s string) bool { return s == toolError || taskstate.Status(s).Valid() }

// guard admits an API call through the gate (Gate.admit).
func (c *Console) guard(next func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, ok := c.gate.admit(w, r)
		if !ok {
			return
		}
		c.track.use()
		next(w, r, who)
	}
}

// row is a task as the table shows it.
type row struct {
	ID     string           `json:"id"`
	Kind   string           `json:"kind,omitempty"`
	Tool   string           `json:"tool"`
	Owner  string           `json:"owner,omitempty"`
	Status taskstate.Status `json:"status"`
	// ToolError: completed with a tool error (isError: true); the page
	// shows it as the status tool_error.
	ToolError     bool   `json:"toolError,omitempty"`
	StatusMessage string `json:"statusMessage,omitempty"`
	Attempt       int    `json:"attempt"`
	Worker        string `json:"worker,omitempty"`
	// ParkedSince is when the task began waiting for its client with no
	// run (consumer: park and resume).
	ParkedSince   *time.Time `json:"parkedSince,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	LastUpdatedAt time.Time  `json:"lastUpdatedAt"`
	Revision      uint64     `json:"revision"`
	// Dead letters and replay (replay.go): Dead, failed after its last
	// attempt; ReplayOf and ReplayedBy link a replay and its original.
	Dead       bool   `json:"dead,omitempty"`
	ReplayOf   string `json:"replayOf,omitempty"`
	ReplayedBy string `json:"replayedBy,omitempty"`
}

func rowOf(t *taskstate.Task) row {
	r := row{ID: t.ID, Kind: t.Kind, Tool: t.Tool, Owner: t.Owner, Status: t.Status, ToolError: isToolError(t), StatusMessage: t.StatusMessage,
		Attempt: t.Attempt, CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, Revision: t.Revision}
	if t.Lease != nil {
		r.Worker = t.Lease.Worker
	}
	if t.Parked != nil {
		since := t.Parked.Since
		r.ParkedSince = &since
	}
	r.Dead, r.ReplayOf, r.ReplayedBy = t.Dead(0), t.ReplayOf(), t.ReplayedBy() // replay.go
	return r
}

// listAnswer is GET api/tasks: the newest matching tasks and the counts by
// tool and shown status (tool_error apart from completed) over every record
// read.
type listAnswer struct {
	Tasks     []row                     `json:"tasks"`
	Matched   int                       `json:"matched"`
	Counts    map[string]map[string]int `json:"counts"`
	Truncated bool                      `json:"truncated"` // MaxScan records read, more exist
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, who caller) {
	q := r.URL.Query()
	tool, status := q.Get("tool"), q.Get("status")
	dead := q.Get("dead") == "true" // dead letters only: replay.go
	if status != "" && !validShown(status) {
		writeErr(w, http.StatusBadRequest, "unknown status "+strconv.Quote(status)+": want working, input_required, completed, tool_error, failed or cancelled")
		return
	}
	limit := c.cfg.MaxTasks
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeErr(w, http.StatusBadRequest, "limit must be a positive integer, got "+strconv.Quote(s))
			return
		}
		limit = min(n, limit)
	}
	ans := listAnswer{Tasks: []row{}, Counts: map[string]map[string]int{}}
	var match []*taskstate.Task
	truncated, err := c.scan(r.Context(), who, func(t *taskstate.Task) {
		if ans.Counts[t.Tool] == nil {
			ans.Counts[t.Tool] = map[string]int{}
		}
		s := shown(t)
		ans.Counts[t.Tool][s]++
		if (tool == "" || t.Tool == tool) && (status == "" || s == status) && (!dead || t.Dead(0)) {
			match = append(match, t)
		}
	})
	ans.Truncated = truncated
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "reading tasks: "+err.Error())
		return
	}
	slices.SortFunc(match, func(a, b *taskstate.Task) int {
		if d := b.CreatedAt.Compare(a.CreatedAt); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	ans.Matched = len(match)
	for _, t := range match[:min(limit, len(match))] {
		ans.Tasks = append(ans.Tasks, rowOf(t))
	}
	writeJSON(w, http.StatusOK, ans)
}

// scan calls fn with every record the caller sees, reading at most MaxScan
// records; truncated says more exist.
func (c *Console) scan(ctx context.Context, who caller, fn func(*taskstate.Task)) (truncated bool, err error) {
	read := 0
	err = c.cfg.Store.Scan(ctx, false, func(t *taskstate.Task) bool {
		if read++; read > c.cfg.MaxScan {
			truncated = true
			return false
		}
		if who.sees(t) {
			fn(t)
		}
		return true
	})
	return truncated, err
}

// timings of a task. Picked up is when the console saw the first attempt
// start (the record keeps no such time): unknown for tasks picked up while
// the console was not in use, even if it saw later attempts.
type timings struct {
	CreatedAt  time.Time  `json:"createdAt"`
	PickedUpAt *time.Time `json:"pickedUpAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	QueuedMs   *int64     `json:"queuedMs,omitempty"`  // created → picked up
	RunningMs  *int64     `json:"runningMs,omitempty"` // picked up → finished (or now)
	TotalMs    int64      `json:"totalMs"`             // created → finished (or now)
}

type detailAnswer struct {
	Task     *taskstate.Task `json:"task"`
	Revision uint64          `json:"revision"`
	// Status is the shown status (tool_error for a tool error).
	Status   string    `json:"status"`
	Attempts []attempt `json:"attempts"`
	Timings  timings   `json:"timings"`
	// Timeline is the task's life, oldest first: created, each take
	// (attempt, worker), requeues, input rounds, parking, the end.
	Timeline []event `json:"timeline"`
}

func (c *Console) detail(w http.ResponseWriter, r *http.Request, who caller) {
	t, err := c.cfg.Store.Get(r.Context(), r.PathValue("id"))
	if err == nil && !who.sees(t) {
		err = taskstate.ErrNotFound // another tenant's task is no task at all
	}
	if errors.Is(err, taskstate.ErrNotFound) {
		writeErr(w, http.StatusNotFound, "no task "+strconv.Quote(r.PathValue("id")))
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "reading the task: "+err.Error())
		return
	}
	rev := t.Revision
	if t, err = taskstate.ResolveResult(r.Context(), c.cfg.Store, t); err != nil {
		writeErr(w, http.StatusInternalServerError, "reading the task's result: "+err.Error())
		return
	}
	seen := c.track.events(t.ID)
	ans := detailAnswer{Task: t, Revision: rev, Status: shown(t), Attempts: []attempt{}, Timeline: timeline(t, seen)}
	for _, e := range seen {
		if e.What == evTaken {
			ans.Attempts = append(ans.Attempts, attempt{N: e.Attempt, Worker: e.Worker, At: e.At})
		}
	}
	end := time.Now().UTC()
	tm := timings{CreatedAt: t.CreatedAt}
	if t.Status.Terminal() {
		end = t.LastUpdatedAt
		tm.FinishedAt = &end
	}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	if len(ans.Attempts) > 0 && ans.Attempts[0].N == 1 {
		p := ans.Attempts[0].At
		tm.PickedUpAt = &p
		tm.QueuedMs = ms(p.Sub(t.CreatedAt))
		tm.RunningMs = ms(end.Sub(p))
	}
	tm.TotalMs = end.Sub(t.CreatedAt).Milliseconds()
	ans.Timings = tm
	writeJSON(w, http.StatusOK, ans)
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, who caller) {
	// The owner of a task never changes: one read tells whose it is.
	t, err := c.cfg.Store.Get(r.Context(), r.PathValue("id"))
	if err == nil && !who.sees(t) {
		err = taskstate.ErrNotFound
	}
	if err == nil {
		t, err = c.cfg.Producer.Cancel(r.Context(), r.PathValue("id"), "cancelled from the console by "+who.who)
	}
	switch {
	case errors.Is(err, taskstate.ErrNotFound):
		writeErr(w, http.StatusNotFound, "no task "+strconv.Quote(r.PathValue("id")))
	case errors.Is(err, producer.ErrTerminal):
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the task already ended: " + string(t.Status), "task": rowOf(t)})
	case err != nil:
		writeErr(w, http.StatusInternalServerError, "cancelling: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]any{"task": rowOf(t)})
	}
}

// events streams the change feed as server-sent events: "ready" once it is
// live, then a "task" event (a row) per change, and "resync" when changes
// were dropped and the list must be read again.
func (c *Console) events(w http.ResponseWriter, r *http.Request, who caller) {
	if c.feed == nil {
		writeErr(w, http.StatusNotImplemented, "this store has no change feed")
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	defer c.track.open()()
	ch, err := c.feed.Changes(r.Context())
	if err != nil {
		writeErr(w, http.StatusServiceUnavailable, "change feed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "event: ready\ndata: {}\n\n")
	fl.Flush()
	beat := time.NewTicker(c.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
		case t, ok := <-ch:
			if !ok {
				return
			}
			if t == nil {
				fmt.Fprint(w, "event: resync\ndata: {}\n\n")
			} else if !who.sees(t) {
				continue
			} else {
				// The tracker's own subscription may have started after
				// this stream's: what the stream shows, it knows.
				c.track.see(t)
				b, _ := json.Marshal(rowOf(t))
				fmt.Fprintf(w, "event: task\ndata: %s\n\n", b)
			}
		}
		fl.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
