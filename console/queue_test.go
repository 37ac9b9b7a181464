package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// queueNow is the queue tests' clock: 30 s into a minute, so the series'
// last minute began at 12:00:00.
var queueNow = time.Date(2026, 7, 28, 12, 0, 30, 0, time.UTC)

// depths is a broker.Depth answering fixed figures and counting its calls.
type depths struct {
	mu    sync.Mutex
	calls int
	asked []string
}

func (d *depths) Depth(_ context.Context, tools []string) (map[string]broker.ToolDepth, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.asked = tools
	return map[string]broker.ToolDepth{"alpha": {Pending: 7, InFlight: 2}}, nil
}

type queueAnswer struct {
	From   time.Time `json:"from"`
	Global bool      `json:"global"`
	Tools  []struct {
		Tool                                     string
		Queued, Running, WaitingForInput, Parked int
		InCatalog, Live                          bool
		Workers                                  []string
		Depth                                    *struct{ Pending, InFlight int64 }
		Ended, Failed                            []int
		Rate, FailureRate                        float64
		RateLimit                                *struct{ N, PerMs int64 }
	} `json:"tools"`
}

// write stores a version of a record at the given time.
func (f *fixture) write(t *testing.T, id string, at time.Time, change func(*taskstate.Task)) *taskstate.Task {
	t.Helper()
	tk, err := taskstate.Mutate(t.Context(), f.store, id, func() time.Time { return at }, func(x *taskstate.Task) error { change(x); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// owned creates a working task of tool for owner at a time.
func (f *fixture) owned(t *testing.T, tool, owner string, at time.Time) string {
	t.Helper()
	tk := &taskstate.Task{ID: taskstate.NewID(), Tool: tool, Owner: owner, Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: at, LastUpdatedAt: at, TTLMs: 600_000}
	if err := f.store.Create(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

func toolErrorResult(x *taskstate.Task) {
	x.Status = taskstate.Completed
	x.Result = json.RawMessage(`{"content":[{"type":"text","text":"boom"}],"isError":true}`)
}

// TestConsoleQueue: the queue view's numbers per tool — live tasks by what
// they wait for, the workers holding them, the catalog's liveness, the
// broker's depth, and the tasks ended per minute (tool errors as failures) —
// and the tenant gate on all of them: a tenant's admin gets its tenant's
// tasks only and no broker depth, which counts every tenant's jobs.
func TestConsoleQueue(t *testing.T) {
	admins, err := console.ParseAdmins([]string{"T1/admin", "*/ops"}, true)
	if err != nil {
		t.Fatal(err)
	}
	dep := &depths{}
	f := newFixture(t, console.Config{
		Admins: admins,
		Depth:  dep,
		Now:    func() time.Time { return queueNow },
		Authenticate: func(r *http.Request) (console.Identity, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			tenant, sub, _ := strings.Cut(tok, "/")
			return console.Identity{Subject: sub, Tenant: tenant, Owner: "iss|" + sub + "|" + tenant}, nil
		},
	})
	const t1, t2 = "iss|user|T1", "iss|user|T2"
	at := func(d time.Duration) time.Time { return queueNow.Add(d) }
	lease := func(w string) func(*taskstate.Task) {
		return func(x *taskstate.Task) {
			x.Attempt++
			x.Lease = &taskstate.Lease{Worker: w, Expires: at(time.Minute)}
		}
	}
	// alpha, T1: one queued, two running on w1 and w2, one waiting for
	// input with its run, one parked; ended: completed 1 and 2 minutes ago,
	// a tool error and a failure this minute and 3 minutes ago, one
	// cancelled before the series began.
	f.owned(t, "alpha", t1, at(-time.Hour))
	f.write(t, f.owned(t, "alpha", t1, at(-time.Hour)), at(-50*time.Minute), lease("w1"))
	f.write(t, f.owned(t, "alpha", t1, at(-time.Hour)), at(-50*time.Minute), lease("w2"))
	f.write(t, f.owned(t, "alpha", t1, at(-time.Hour)), at(-50*time.Minute), func(x *taskstate.Task) {
		lease("w1")(x)
		x.Status = taskstate.InputRequired
		x.InputRequests = map[string]json.RawMessage{"q": json.RawMessage(`{}`)}
	})
	f.write(t, f.owned(t, "alpha", t1, at(-time.Hour)), at(-50*time.Minute), func(x *taskstate.Task) {
		x.Status = taskstate.InputRequired
		x.Parked = &taskstate.Parked{Since: at(-50 * time.Minute), Until: at(time.Hour)}
	})
	for _, end := range []struct {
		ago    time.Duration
		change func(*taskstate.Task)
	}{
		{time.Minute, func(x *taskstate.Task) { x.Status = taskstate.Completed }},
		{2 * time.Minute, func(x *taskstate.Task) { x.Status = taskstate.Completed }},
		{10 * time.Second, toolErrorResult},
		{3 * time.Minute, func(x *taskstate.Task) { x.Status = taskstate.Failed }},
		{20 * time.Minute, func(x *taskstate.Task) { x.Status = taskstate.Cancelled }},
	} {
		f.write(t, f.owned(t, "alpha", t1, at(-time.Hour)), at(-end.ago), end.change)
	}
	// alpha and beta, T2: running on w9, queued, and a failure this minute.
	f.write(t, f.owned(t, "alpha", t2, at(-time.Hour)), at(-time.Minute), lease("w9"))
	f.owned(t, "beta", t2, at(-time.Hour))
	f.write(t, f.owned(t, "beta", t2, at(-time.Hour)), at(-time.Second), func(x *taskstate.Task) { x.Status = taskstate.Failed })
	// The catalog: alpha live, gamma published but no longer live, a
	// resource (never a task) left out.
	for _, ti := range []*taskstate.ToolInfo{
		{Name: "alpha", InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskOptional, LiveUntil: at(time.Minute),
			RateLimit: &taskstate.Rate{N: 5, Per: time.Second}},
		{Name: "gamma", InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskOptional, LiveUntil: at(-time.Minute)},
		{Kind: "resource", Name: "file:///x", InputSchema: json.RawMessage(`{}`)},
	} {
		if err := f.store.PublishTool(t.Context(), ti); err != nil {
			t.Fatal(err)
		}
	}

	get := func(token string) queueAnswer {
		t.Helper()
		var ans queueAnswer
		if code := f.do(t, "GET", "/console/api/queue", token, &ans); code != 200 {
			t.Fatalf("queue as %s: %d", token, code)
		}
		return ans
	}
	zero := make([]int, 15)
	series := func(at map[int]int) []int {
		s := slices.Clone(zero)
		for i, n := range at {
			s[i] = n
		}
		return s
	}
	type line struct {
		queued, running, waiting, parked int
		catalog, live                    bool
		workers                          []string
		ended, failed                    []int
	}
	check := func(who string, ans queueAnswer, want map[string]line) {
		t.Helper()
		if !ans.From.Equal(time.Date(2026, 7, 28, 11, 46, 0, 0, time.UTC)) {
			t.Errorf("%s: series from %s, want 11:46, 15 minutes ending with the current one", who, ans.From)
		}
		var tools []string
		for _, q := range ans.Tools {
			tools = append(tools, q.Tool)
			w, ok := want[q.Tool]
			if !ok {
				continue
			}
			got := line{q.Queued, q.Running, q.WaitingForInput, q.Parked, q.InCatalog, q.Live, q.Workers, q.Ended, q.Failed}
			if g, e := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", w); g != e {
				t.Errorf("%s: %s\n got %s\nwant %s", who, q.Tool, g, e)
			}
		}
		var keys []string
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(tools, keys) {
			t.Errorf("%s: tools %v, want %v", who, tools, keys)
		}
	}

	// A tenant's admin: T1's tasks only, no broker depth asked for.
	ans := get("T1/admin")
	check("T1/admin", ans, map[string]line{
		"alpha": {1, 2, 1, 1, true, true, []string{"w1", "w2"}, series(map[int]int{14: 1, 13: 1, 12: 1, 11: 1}), series(map[int]int{14: 1, 11: 1})},
		"gamma": {0, 0, 0, 0, true, false, []string{}, zero, zero},
	})
	if a, g := ans.Tools[0], ans.Tools[1]; a.RateLimit == nil || *a.RateLimit != (struct{ N, PerMs int64 }{5, 1000}) || g.RateLimit != nil {
		t.Errorf("T1/admin: rate limits %+v and %+v, want alpha's 5 per 1000 ms and none for gamma", a.RateLimit, g.RateLimit)
	}
	if a := ans.Tools[0]; ans.Global || a.Depth != nil || a.Rate != 4/14.5 || a.FailureRate != 0.5 {
		t.Errorf("T1/admin: global %v, depth %v, rate %v, failure rate %v; want no depth, 4 ended in 14.5 minutes, half of them failed", ans.Global, a.Depth, a.Rate, a.FailureRate)
	}
	dep.mu.Lock()
	if dep.calls != 0 {
		t.Errorf("the broker's depth was read %d times for a tenant's admin, want never", dep.calls)
	}
	dep.mu.Unlock()

	// A global operator: every tenant's, and the broker's depth.
	ans = get("T9/ops")
	check("*/ops", ans, map[string]line{
		"alpha": {1, 3, 1, 1, true, true, []string{"w1", "w2", "w9"}, series(map[int]int{14: 1, 13: 1, 12: 1, 11: 1}), series(map[int]int{14: 1, 11: 1})},
		"beta":  {1, 0, 0, 0, false, false, []string{}, series(map[int]int{14: 1}), series(map[int]int{14: 1})},
		"gamma": {0, 0, 0, 0, true, false, []string{}, zero, zero},
	})
	if a := ans.Tools[0]; !ans.Global || a.Depth == nil || a.Depth.Pending != 7 || a.Depth.InFlight != 2 || ans.Tools[1].Depth != nil {
		t.Errorf("*/ops: global %v, alpha's depth %+v, beta's %+v; want alpha 7 pending, 2 in flight, beta none", ans.Global, a.Depth, ans.Tools[1].Depth)
	}
	dep.mu.Lock()
	if dep.calls != 1 || !slices.Equal(dep.asked, []string{"alpha", "beta", "gamma"}) {
		t.Errorf("depth read %d times for %v, want once for alpha, beta, gamma", dep.calls, dep.asked)
	}
	dep.mu.Unlock()

	// A tool error counts under its own status in the list, and filters.
	var list struct {
		Tasks []struct {
			ID        string
			ToolError bool
		}
		Counts map[string]map[string]int
	}
	if code := f.do(t, "GET", "/console/api/tasks?status=tool_error", "T1/admin", &list); code != 200 || len(list.Tasks) != 1 || !list.Tasks[0].ToolError {
		t.Fatalf("list status=tool_error: %d %+v, want the one tool error", code, list)
	}
	if c := list.Counts["alpha"]; c["completed"] != 2 || c["tool_error"] != 1 || c["failed"] != 1 {
		t.Errorf("counts of alpha %v, want 2 completed, 1 tool_error, 1 failed", c)
	}
	var d struct{ Status string }
	if code := f.do(t, "GET", "/console/api/tasks/"+list.Tasks[0].ID, "T1/admin", &d); code != 200 || d.Status != "tool_error" {
		t.Errorf("detail of the tool error: %d, status %q, want tool_error", code, d.Status)
	}
	list.Tasks = nil
	if code := f.do(t, "GET", "/console/api/tasks?status=completed", "T1/admin", &list); code != 200 || len(list.Tasks) != 2 || list.Tasks[0].ToolError || list.Tasks[1].ToolError {
		t.Errorf("list status=completed: %d %+v, want the 2 completed without error", code, list)
	}

	// The queue view answers admins only, like the rest of the API.
	var e struct{ Error string }
	if code := f.do(t, "GET", "/console/api/queue", "T1/user", &e); code != 403 {
		t.Errorf("queue as a user: %d (%s), want 403", code, e.Error)
	}
	if code := f.do(t, "GET", "/console/api/queue", "", &e); code != 403 && code != 401 {
		t.Errorf("queue without a token: %d (%s), want a refusal", code, e.Error)
	}
}

// getOK reads path as an anonymous caller, which must get 200.
func getOK[T any](t *testing.T, f *fixture, path string) T {
	t.Helper()
	var v T
	if code := f.do(t, "GET", path, "", &v); code != 200 {
		t.Fatalf("GET %s: %d", path, code)
	}
	return v
}

type timelineAnswer struct {
	Status   string `json:"status"`
	Timeline []struct {
		At      time.Time
		What    string
		Status  string
		Attempt int
		Worker  string
		Seen    bool
	} `json:"timeline"`
}

// steps renders a timeline as "what/attempt/worker/status" steps.
func (a timelineAnswer) steps() []string {
	var out []string
	for _, e := range a.Timeline {
		s := e.What
		if e.Attempt > 0 {
			s += fmt.Sprintf("/%d", e.Attempt)
		}
		if e.Worker != "" {
			s += "/" + e.Worker
		}
		if e.Status != "" {
			s += "/" + e.Status
		}
		out = append(out, s)
	}
	return out
}

// TestConsoleTimeline: a task's timeline while the console is open —
// created, taken by w1, an input round (asked, parked, answered, resumed),
// taken again by w2, ended with a tool error — each step seen on the change
// feed; and once it ended and was purged, the queue view still counts it.
func TestConsoleTimeline(t *testing.T) {
	f := newFixture(t, console.Config{Now: func() time.Time { return queueNow }})
	detail := func(id string) timelineAnswer { return getOK[timelineAnswer](t, f, "/console/api/tasks/"+id) }
	// The console follows the feed from its first request on.
	if code := f.do(t, "GET", "/console/api/tasks", "", nil); code != 200 {
		t.Fatalf("list: %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, _, alive := f.feed.counts(); alive != 1; _, _, alive = f.feed.counts() {
		if time.Now().After(deadline) {
			t.Fatal("the console does not follow the change feed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	id := f.owned(t, "ask", "", queueNow.Add(-time.Minute))
	at := func(s int) time.Time { return queueNow.Add(time.Duration(s-50) * time.Second) }
	var want []string
	// step writes a version and waits until the timeline shows its step
	// (one at a time: versions unread on the feed would coalesce).
	step := func(s int, change func(*taskstate.Task), shows ...string) {
		t.Helper()
		f.write(t, id, at(s), change)
		want = append(want, shows...)
		deadline := time.Now().Add(10 * time.Second)
		for {
			d := detail(id)
			got := d.steps()
			seen := true
			for _, e := range d.Timeline[1:] {
				seen = seen && e.Seen
			}
			if slices.Equal(got, want) && seen {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timeline %v, want %v, every step after created seen on the feed: %+v", got, want, d.Timeline)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	want = []string{"created"}
	step(1, func(x *taskstate.Task) {
		x.Attempt = 1
		x.Lease = &taskstate.Lease{Worker: "w1", Expires: at(60)}
	}, "taken/1/w1")
	step(2, func(x *taskstate.Task) {
		x.Status = taskstate.InputRequired
		x.InputRequests = map[string]json.RawMessage{"q1": json.RawMessage(`{}`), "q2": json.RawMessage(`{}`)}
	}, "input/1")
	step(3, func(x *taskstate.Task) {
		x.Parked = &taskstate.Parked{Since: at(3), Until: at(3600)}
		x.Lease = nil
		x.Parks++
	}, "parked")
	step(4, func(x *taskstate.Task) {
		x.InputResponses = map[string]json.RawMessage{"q1": json.RawMessage(`{}`), "q2": json.RawMessage(`{}`)}
	}, "answered")
	step(5, func(x *taskstate.Task) {
		x.Status, x.Parked, x.InputRequests = taskstate.Working, nil, nil
		x.Requeues++
	}, "resumed", "requeued")
	step(6, func(x *taskstate.Task) {
		x.Attempt = 2
		x.Lease = &taskstate.Lease{Worker: "w2", Expires: at(60)}
	}, "taken/2/w2")
	step(7, func(x *taskstate.Task) {
		toolErrorResult(x)
		x.Lease = nil
	}, "ended/tool_error")
	if d := detail(id); d.Status != "tool_error" || !d.Timeline[len(d.Timeline)-1].At.Equal(at(7)) {
		t.Fatalf("detail status %q, last step %+v; want tool_error at %s", d.Status, d.Timeline[len(d.Timeline)-1], at(7))
	}

	// Purged, it is gone from the store; the queue view still counts it
	// from what the console saw.
	if err := f.store.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	var q queueAnswer
	if code := f.do(t, "GET", "/console/api/queue", "", &q); code != 200 || len(q.Tools) != 1 || q.Tools[0].Tool != "ask" ||
		q.Tools[0].Ended[13] != 1 || q.Tools[0].Failed[13] != 1 || !slices.Equal(q.Tools[0].Workers, []string{"w1", "w2"}) {
		t.Fatalf("queue after the purge: %d %+v, want ask with 1 ended, 1 failed the minute before this one, workers w1 and w2", code, q)
	}

	// A task whose versions between its creation and its end the console
	// missed (coalesced on the feed, say): the attempts it did not see are
	// said so; the third is seen only with the outcome.
	other := f.owned(t, "ask", "", queueNow.Add(-time.Minute))
	f.write(t, other, at(8), func(x *taskstate.Task) { x.Attempt = 3; x.Status = taskstate.Failed; x.StatusMessage = "gave up" })
	deadline = time.Now().Add(10 * time.Second)
	seenOnlyEnded := []string{"created", "unseen", "taken/3", "ended/failed"}
	for d := detail(other); !slices.Equal(d.steps(), seenOnlyEnded); d = detail(other) {
		if time.Now().After(deadline) {
			t.Fatalf("timeline of a task seen created and ended: %v, want %v", d.steps(), seenOnlyEnded)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
