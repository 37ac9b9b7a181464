package console

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// seriesMinutes is how many minutes the queue view's series cover, the
// current one included.
const seriesMinutes = 15

// queueAnswer is GET api/queue: the queue per tool as an operator watches
// it, over the tasks the caller sees.
type queueAnswer struct {
	Now time.Time `json:"now"`
	// From is the start of the series' first minute; the last one is the
	// current minute, still running.
	From    time.Time `json:"from"`
	Minutes int       `json:"minutes"`
	// Global: the caller sees every tenant's tasks, so the broker's depth
	// (which counts them all) is shown.
	Global     bool        `json:"global"`
	Tools      []toolQueue `json:"tools"`
	Truncated  bool        `json:"truncated"` // MaxScan records read, more exist
	DepthError string      `json:"depthError,omitempty"`
}

// toolQueue is one tool's line of the queue view.
type toolQueue struct {
	// Tool is the catalog key: a tool's name, "prompt/<name>" for a prompt.
	Tool string `json:"tool"`
	// Queued tasks wait for a worker to take them (working, no lease);
	// Running ones are held by a worker (working, leased); WaitingForInput
	// ones wait for their client's answers with their run still holding a
	// worker slot; Parked ones wait for them with no run (input_required,
	// parked).
	Queued          int `json:"queued"`
	Running         int `json:"running"`
	WaitingForInput int `json:"waitingForInput"`
	Parked          int `json:"parked"`
	// InCatalog: a worker published the tool; Live: a worker's heartbeat
	// says it serves the tool now (until LiveUntil).
	InCatalog bool       `json:"inCatalog"`
	Live      bool       `json:"live"`
	LiveUntil *time.Time `json:"liveUntil,omitempty"`
	// RateLimit is the tool's rate limit its workers publish (feature:
	// rate limits per tool): {n, perMs}; absent: none.
	RateLimit *taskstate.Rate `json:"rateLimit,omitempty"`
	// Workers are the workers seen serving the tool: holding a lease on
	// one of its tasks now, or seen taking one in the series' minutes.
	Workers []string `json:"workers"`
	// Depth is the broker's backlog (global callers only; absent when the
	// broker cannot tell or never had a consumer for the tool).
	Depth *depth `json:"depth,omitempty"`
	// Ended and Failed are per-minute counts, oldest first, of the tasks
	// that ended (any terminal status) and of those that failed (failed,
	// or a tool error) in each minute from From.
	Ended  []int `json:"ended"`
	Failed []int `json:"failed"`
	// Rate is the tasks ended per minute over the series; FailureRate the
	// share of them that failed (0 when none ended).
	Rate        float64 `json:"rate"`
	FailureRate float64 `json:"failureRate"`
}

type depth struct {
	Pending  int64 `json:"pending"`
	InFlight int64 `json:"inFlight"`
}

func (c *Console) queue(w http.ResponseWriter, r *http.Request, who caller) {
	now := c.cfg.Now().UTC()
	from := now.Truncate(time.Minute).Add(-(seriesMinutes - 1) * time.Minute)
	ans := queueAnswer{Now: now, From: from, Minutes: seriesMinutes, Global: who.global(), Tools: []toolQueue{}}
	qb := &queueBuilder{from: from, tools: map[string]*toolQueue{}, counted: map[string]bool{}}
	truncated, err := c.scan(r.Context(), who, qb.addTask)
	ans.Truncated = truncated
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "reading tasks: "+err.Error())
		return
	}
	// What the change feed showed: tasks that ended and are gone from the
	// store already (a short retention), and the workers that took tasks.
	qb.addRecent(c.track.recent(from, who.seesOwner))
	if c.cfg.Catalog != nil {
		entries, err := c.cfg.Catalog.Tools(r.Context())
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "reading the catalog: "+err.Error())
			return
		}
		qb.addCatalog(entries, now)
	}
	keys := qb.keys()
	if who.global() && c.cfg.Depth != nil && len(keys) > 0 {
		by, err := c.cfg.Depth.Depth(r.Context(), keys)
		if err != nil {
			ans.DepthError = err.Error()
		}
		for key, d := range by {
			if q := qb.tools[key]; q != nil {
				q.Depth = &depth{Pending: d.Pending, InFlight: d.InFlight}
			}
		}
	}
	ans.Tools = qb.rows(keys, now)
	writeJSON(w, http.StatusOK, ans)
}

// queueBuilder gathers the queue view's rows, a toolQueue per catalog key.
type queueBuilder struct {
	from    time.Time // the first minute of the series
	tools   map[string]*toolQueue
	counted map[string]bool // tasks ended in the series' minutes, counted once
}

// line is key's row, made on first use.
func (qb *queueBuilder) line(key string) *toolQueue {
	q := qb.tools[key]
	if q == nil {
		q = &toolQueue{Tool: key, Workers: []string{}, Ended: make([]int, seriesMinutes), Failed: make([]int, seriesMinutes)}
		qb.tools[key] = q
	}
	return q
}

// countEnd counts task id's end, with status at at, in q's series, once.
func (qb *queueBuilder) countEnd(q *toolQueue, id, status string, at time.Time) {
	if qb.counted[id] || at.Before(qb.from) {
		return
	}
	qb.counted[id] = true
	if i := int(at.Sub(qb.from) / time.Minute); i < seriesMinutes {
		q.Ended[i]++
		if status == string(taskstate.Failed) || status == toolError {
			q.Failed[i]++
		}
	}
}

// addTask counts a record the scan read.
func (qb *queueBuilder) addTask(t *taskstate.Task) {
	q := qb.line(taskstate.CatalogKey(t.Kind, t.Tool))
	switch {
	case t.Status.Terminal():
		qb.countEnd(q, t.ID, shown(t), t.LastUpdatedAt)
	case t.Parked != nil:
		q.Parked++
	case t.Status == taskstate.InputRequired:
		q.WaitingForInput++
	case t.Lease != nil:
		q.Running++
		addWorker(q, t.Lease.Worker)
	default:
		q.Queued++
	}
}

// addRecent counts what the change feed saw end, and the workers it saw
// take tasks.
func (qb *queueBuilder) addRecent(done []ended, workers map[string][]string) {
	for _, e := range done {
		qb.countEnd(qb.line(e.key), e.id, e.status, e.at)
	}
	for key, ws := range workers {
		q := qb.line(key)
		for _, w := range ws {
			addWorker(q, w)
		}
	}
}

// addCatalog marks the rows of the catalog's tools and prompts (resources,
// templates and completions are never tasks) and their liveness.
func (qb *queueBuilder) addCatalog(entries []*taskstate.ToolInfo, now time.Time) {
	for _, e := range entries {
		if e.Kind != taskstate.KindTool && e.Kind != taskstate.KindPrompt {
			continue
		}
		q := qb.line(e.Key())
		q.InCatalog, q.Live = true, e.Live(now)
		if !e.LiveUntil.IsZero() {
			until := e.LiveUntil
			q.LiveUntil = &until
		}
		q.RateLimit = e.RateLimit // feature: rate limits per tool
	}
}

func (qb *queueBuilder) keys() []string {
	keys := make([]string, 0, len(qb.tools))
	for key := range qb.tools {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// rows are the rows of keys, with their rates over the series so far.
func (qb *queueBuilder) rows(keys []string, now time.Time) []toolQueue {
	minutes := max(now.Sub(qb.from).Minutes(), 1)
	out := make([]toolQueue, 0, len(keys))
	for _, key := range keys {
		q := qb.tools[key]
		slices.Sort(q.Workers)
		var ended, failed int
		for i := range q.Ended {
			ended, failed = ended+q.Ended[i], failed+q.Failed[i]
		}
		q.Rate = float64(ended) / minutes
		if ended > 0 {
			q.FailureRate = float64(failed) / float64(ended)
		}
		out = append(out, *q)
	}
	return out
}

func addWorker(q *toolQueue, w string) {
	if !slices.Contains(q.Workers, w) {
		q.Workers = append(q.Workers, w)
	}
}

// timeline is t's life as the console knows it: its creation, what the
// console saw on the change feed (seen), and what the record tells of the
// rest — attempts made while nobody watched, its parking, its pending input
// requests, its end.
func timeline(t *taskstate.Task, seen []event) []event {
	out := []event{{At: t.CreatedAt, What: evCreated}}
	firstSeen := 0 // the first attempt seen taken
	var parked, input, end bool
	for _, e := range seen {
		switch e.What {
		case evTaken:
			if firstSeen == 0 {
				firstSeen = e.Attempt
			}
		case evParked:
			parked = true
		case evInput:
			input = true
		case evTerminal:
			end = true
		}
	}
	if unseen := t.Attempt; unseen > 0 && firstSeen != 1 {
		if firstSeen > 1 {
			unseen = firstSeen - 1
		}
		e := event{At: t.CreatedAt, What: evUnseen, Detail: "attempt 1 ran while the console was not following the store"}
		if unseen > 1 {
			e.Detail = "attempts 1–" + strconv.Itoa(unseen) + " ran while the console was not following the store"
		}
		out = append(out, e)
	}
	out = append(out, seen...)
	if t.Parked != nil && !parked {
		out = append(out, event{At: t.Parked.Since, What: evParked, Detail: "waits for its client until " + t.Parked.Until.UTC().Format(time.RFC3339)})
	} else if t.Status == taskstate.InputRequired && !input {
		out = append(out, event{At: t.LastUpdatedAt, What: evInput, Attempt: t.Attempt, Detail: plural(len(t.InputRequests), "input request") + " pending"})
	}
	if t.Status.Terminal() && !end {
		out = append(out, event{At: t.LastUpdatedAt, What: evTerminal, Status: shown(t), Detail: t.StatusMessage})
	}
	sort.SliceStable(out[1:], func(i, j int) bool { return out[1+i].At.Before(out[1+j].At) })
	return out
}
