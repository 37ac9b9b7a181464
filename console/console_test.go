package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// cancels is an Executor that remembers the cancel broadcasts it was asked for.
type cancels struct {
	mu  sync.Mutex
	ids []string
}

func (c *cancels) Start(context.Context, *broker.Job) error { return nil }
func (c *cancels) Cancel(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
	return nil
}

type fixture struct {
	store *natskv.Store
	feed  *countedFeed // the store as the console sees it
	exec  *cancels
	srv   *httptest.Server
}

// countedFeed is the store with its change feed subscriptions counted: made
// in all, made before the console had any request, and open.
type countedFeed struct {
	*natskv.Store
	used atomic.Bool // the console has had a request

	mu                  sync.Mutex
	calls, early, alive int
}

func (f *countedFeed) Changes(ctx context.Context) (<-chan *taskstate.Task, error) {
	ch, err := f.Store.Changes(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.calls++
	f.alive++
	if !f.used.Load() {
		f.early++
	}
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		f.alive--
		f.mu.Unlock()
	}()
	return ch, nil
}

func (f *countedFeed) counts() (calls, early, alive int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.early, f.alive
}

func newFixture(t *testing.T, cfg console.Config) *fixture {
	t.Helper()
	_, js := natstest.Start(t).Connect(t)
	name := natstest.Name(t)
	st, err := natskv.New(t.Context(), js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true})
	if err != nil {
		t.Fatalf("natskv.New: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{store: st, feed: &countedFeed{Store: st}, exec: &cancels{}}
	cfg.Store = f.feed
	cfg.Producer = producer.New(st, f.exec, nil)
	mux := http.NewServeMux()
	cons := console.New(t.Context(), cfg)
	mux.Handle(console.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.feed.used.Store(true)
		cons.ServeHTTP(w, r)
	}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// task stores a record created at the given offset from a fixed time.
func (f *fixture) task(t *testing.T, tool string, status taskstate.Status, at time.Duration) *taskstate.Task {
	t.Helper()
	created := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC).Add(at)
	tk := &taskstate.Task{ID: taskstate.NewID(), Tool: tool, Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: created, LastUpdatedAt: created, TTLMs: 60_000}
	if err := f.store.Create(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	if status != taskstate.Working {
		var err error
		tk, err = taskstate.Mutate(t.Context(), f.store, tk.ID, time.Now, func(x *taskstate.Task) error { x.Status = status; return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	return tk
}

func (f *fixture) do(t *testing.T, method, path, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d, body not JSON: %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

type listAnswer struct {
	Tasks []struct {
		ID     string `json:"id"`
		Tool   string `json:"tool"`
		Status string `json:"status"`
	} `json:"tasks"`
	Matched int                       `json:"matched"`
	Counts  map[string]map[string]int `json:"counts"`
}

func TestConsoleListDetailCancel(t *testing.T) {
	f := newFixture(t, console.Config{MaxTasks: 2})
	old := f.task(t, "wait", taskstate.Working, 0)
	mid := f.task(t, "wait", taskstate.Completed, time.Second)
	f.task(t, "echo", taskstate.Failed, 2*time.Second)
	newest := f.task(t, "wait", taskstate.Working, 3*time.Second)

	var ans listAnswer
	if code := f.do(t, "GET", "/console/api/tasks?tool=wait", "", &ans); code != 200 {
		t.Fatalf("list: %d", code)
	}
	if ans.Matched != 3 || len(ans.Tasks) != 2 || ans.Tasks[0].ID != newest.ID || ans.Tasks[1].ID != mid.ID {
		t.Fatalf("list tool=wait: %+v, want the 2 newest of 3 wait tasks, newest first", ans)
	}
	want := map[string]map[string]int{"wait": {"working": 2, "completed": 1}, "echo": {"failed": 1}}
	if g, _ := json.Marshal(ans.Counts); string(g) != string(must(json.Marshal(want))) {
		t.Fatalf("counts %s, want %s", g, must(json.Marshal(want)))
	}
	if code := f.do(t, "GET", "/console/api/tasks?status=failed", "", &ans); code != 200 || len(ans.Tasks) != 1 || ans.Tasks[0].Tool != "echo" {
		t.Fatalf("list status=failed: %d %+v", code, ans)
	}
	var e struct{ Error string }
	if code := f.do(t, "GET", "/console/api/tasks?status=done", "", &e); code != 400 || !strings.Contains(e.Error, `"done"`) {
		t.Fatalf("bad status: %d %q", code, e.Error)
	}

	// Detail of a finished task: the record and its timings.
	var d struct {
		Task     taskstate.Task `json:"task"`
		Revision uint64         `json:"revision"`
		Timings  struct {
			FinishedAt *time.Time `json:"finishedAt"`
			TotalMs    int64      `json:"totalMs"`
		} `json:"timings"`
	}
	if code := f.do(t, "GET", "/console/api/tasks/"+mid.ID, "", &d); code != 200 || d.Task.ID != mid.ID || d.Revision != mid.Revision ||
		d.Timings.FinishedAt == nil || !d.Timings.FinishedAt.Equal(mid.LastUpdatedAt) || d.Timings.TotalMs != mid.LastUpdatedAt.Sub(mid.CreatedAt).Milliseconds() {
		t.Fatalf("detail: %d %+v", code, d)
	}
	if code := f.do(t, "GET", "/console/api/tasks/"+taskstate.NewID(), "", &e); code != 404 {
		t.Fatalf("detail of an unknown task: %d", code)
	}

	// Cancel: through the producer, once.
	if code := f.do(t, "POST", "/console/api/tasks/"+old.ID+"/cancel", "", nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	got, err := f.store.Get(t.Context(), old.ID)
	if err != nil || got.Status != taskstate.Cancelled || !strings.Contains(got.StatusMessage, "console") {
		t.Fatalf("after cancel: %+v %v", got, err)
	}
	f.exec.mu.Lock()
	ids := f.exec.ids
	f.exec.mu.Unlock()
	if len(ids) != 1 || ids[0] != old.ID {
		t.Fatalf("cancel broadcasts %v, want %s", ids, old.ID)
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+old.ID+"/cancel", "", &e); code != 409 {
		t.Fatalf("second cancel: %d, want 409", code)
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+mid.ID+"/cancel", "", &e); code != 409 {
		t.Fatalf("cancel of a completed task: %d, want 409", code)
	}
	if got, _ := f.store.Get(t.Context(), mid.ID); got.Status != taskstate.Completed || got.Revision != mid.Revision {
		t.Fatalf("refused cancel changed the record: %+v", got)
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+taskstate.NewID()+"/cancel", "", &e); code != 404 {
		t.Fatalf("cancel of an unknown task: %d", code)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestConsoleEvents: the stream says ready, then carries creates and updates
// as rows; the detail view reports the pickup the console saw on the feed.
func TestConsoleEvents(t *testing.T) {
	f := newFixture(t, console.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sc := bufio.NewScanner(f.events(t, ctx))
	next := func() (event, data string) {
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && event != "":
				return event, data
			}
		}
		t.Fatalf("event stream ended: %v", sc.Err())
		return "", ""
	}
	if ev, _ := next(); ev != "ready" {
		t.Fatalf("first event %q, want ready", ev)
	}
	tk := f.task(t, "wait", taskstate.Working, 0)
	picked := f.pickUp(t, tk.ID, 1, "w1")
	// The create, then the pickup; a stream that reads late gets only the
	// pickup, as unread versions of a record coalesce into the newest.
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "working/w1" {
		ev, data := next()
		var r struct {
			ID, Status, Worker string
			Attempt            int
		}
		if ev != "task" || json.Unmarshal([]byte(data), &r) != nil || r.ID != tk.ID {
			t.Fatalf("event %s %s, want a row of %s", ev, data, tk.ID)
		}
		if seen = append(seen, r.Status+"/"+r.Worker); len(seen) > 2 || len(seen) == 2 && seen[0] != "working/" {
			t.Fatalf("rows on the stream %v, want the create then the pickup by w1", seen)
		}
	}

	// The console's own follower saw the pickup too (it has no event to wait on).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d struct {
			Attempts []struct {
				N      int
				Worker string
				At     time.Time
			} `json:"attempts"`
			Timings struct{ PickedUpAt *time.Time } `json:"timings"`
		}
		f.do(t, "GET", "/console/api/tasks/"+tk.ID, "", &d)
		if len(d.Attempts) == 1 {
			if a := d.Attempts[0]; a.N != 1 || a.Worker != "w1" || !a.At.Equal(picked.LastUpdatedAt) || d.Timings.PickedUpAt == nil {
				t.Fatalf("attempts %+v timings %+v, want attempt 1 by w1 at %s", d.Attempts, d.Timings, picked.LastUpdatedAt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("detail never showed the pickup: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConsoleAccess(t *testing.T) {
	f := newFixture(t, console.Config{
		Admins: []console.Admin{{Subject: "root"}},
		Authenticate: func(r *http.Request) (console.Identity, error) {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return console.Identity{}, errors.New("no bearer token")
			}
			return console.Identity{Subject: tok, Owner: "iss|" + tok}, nil // the test's tokens are their subjects
		},
	})
	tk := f.task(t, "wait", taskstate.Working, 0)
	var e struct{ Error string }
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/console/api/tasks", "", 401},
		{"GET", "/console/api/events", "", 401},
		{"POST", "/console/api/tasks/" + tk.ID + "/cancel", "", 401},
		{"GET", "/console/api/tasks", "bob", 403},
		{"POST", "/console/api/tasks/" + tk.ID + "/cancel", "bob", 403},
		{"GET", "/console/api/tasks/" + tk.ID, "bob", 403},
		{"GET", "/console/api/tasks", "root", 200},
		{"GET", "/console/api/nope", "root", 404},
	} {
		if code := f.do(t, c.method, c.path, c.token, &e); code != c.want {
			t.Errorf("%s %s as %q: %d (%s), want %d", c.method, c.path, c.token, code, e.Error, c.want)
		}
	}
	if got, _ := f.store.Get(t.Context(), tk.ID); got.Status != taskstate.Working {
		t.Fatalf("a refused cancel changed the task: %s", got.Status)
	}

	// The page itself holds no data and loads without a token.
	resp, err := http.Get(f.srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "task console") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("page: %d %.80s", resp.StatusCode, page)
	}

	// A foreign Host (DNS rebinding) and a cross-origin write are refused.
	req, _ := http.NewRequest("GET", f.srv.URL+"/console/", nil)
	req.Host = "evil.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("foreign Host: %v %v", resp, err)
	}
	req, _ = http.NewRequest("POST", f.srv.URL+"/console/api/tasks/"+tk.ID+"/cancel", nil)
	req.Header.Set("Authorization", "Bearer root")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("cross-origin cancel: %v %v", resp, err)
	}
	if got, _ := f.store.Get(t.Context(), tk.ID); got.Status != taskstate.Working {
		t.Fatalf("a refused cancel changed the task: %s", got.Status)
	}
}

// events opens the console's event stream, until ctx ends.
func (f *fixture) events(t *testing.T, ctx context.Context) io.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/console/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	return resp.Body
}

// pickUp writes the version a worker writes when it takes the task.
func (f *fixture) pickUp(t *testing.T, id string, attempt int, worker string) *taskstate.Task {
	t.Helper()
	tk, err := taskstate.Mutate(t.Context(), f.store, id, time.Now, func(x *taskstate.Task) error {
		x.Attempt = attempt
		x.Lease = &taskstate.Lease{Worker: worker, Expires: time.Now().Add(time.Minute)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

type attemptsAnswer struct {
	Attempts []struct {
		N      int
		Worker string
	} `json:"attempts"`
	Timings struct{ PickedUpAt *time.Time } `json:"timings"`
}

// TestConsoleFollowsFeedOnlyInUse: no change feed subscription until the
// console gets a request; one while it is used or an event stream is open,
// ending TrackIdle after the last use; and a task whose first attempts ran
// before has a history without them and no pick-up time.
func TestConsoleFollowsFeedOnlyInUse(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := newFixture(t, console.Config{TrackIdle: idle})
	waitAlive := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, alive := f.feed.counts()
			if alive == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d feed subscriptions open after 10s, want %d", what, alive, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	detail := func(id string) attemptsAnswer {
		t.Helper()
		var d attemptsAnswer
		if code := f.do(t, "GET", "/console/api/tasks/"+id, "", &d); code != 200 {
			t.Fatalf("detail: %d", code)
		}
		return d
	}

	// Work goes on before anyone opens the console.
	early := f.task(t, "wait", taskstate.Working, 0)
	f.pickUp(t, early.ID, 1, "w1")
	if calls, _, _ := f.feed.counts(); calls != 0 {
		t.Fatalf("%d change feed subscriptions before any console request, want 0", calls)
	}

	// The first request starts following; the early task's first attempt
	// stays unknown, its second is seen.
	if code := f.do(t, "GET", "/console/api/tasks", "", nil); code != 200 {
		t.Fatalf("list: %d", code)
	}
	waitAlive("after the first request", 1)
	f.pickUp(t, early.ID, 2, "w2")
	deadline := time.Now().Add(10 * time.Second)
	d := detail(early.ID)
	for len(d.Attempts) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("detail never showed the second attempt")
		}
		time.Sleep(20 * time.Millisecond)
		d = detail(early.ID)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].N != 2 || d.Attempts[0].Worker != "w2" || d.Timings.PickedUpAt != nil {
		t.Fatalf("attempts %+v, picked up at %v; want only attempt 2 by w2 and no pick-up time", d.Attempts, d.Timings.PickedUpAt)
	}

	// An open event stream keeps the console following for several idle
	// periods without any other request.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if line, err := bufio.NewReader(f.events(t, ctx)).ReadString('\n'); err != nil || line != "event: ready\n" {
		t.Fatalf("event stream began with %q, %v", line, err)
	}
	waitAlive("with an event stream open", 2) // the tracker's and the stream's
	for start := time.Now(); time.Since(start) < 3*idle; time.Sleep(10 * time.Millisecond) {
		if _, _, alive := f.feed.counts(); alive != 2 {
			t.Fatalf("%d feed subscriptions open %s into an open event stream, want 2", alive, time.Since(start))
		}
	}

	// Closing the stream leaves the tracker following for the idle period.
	cancel()
	closed := time.Now()
	waitAlive("after the event stream closed", 1)
	waitAlive("after the idle period", 0)
	if gone := time.Since(closed); gone < idle {
		t.Fatalf("stopped following %s after the last use, want at least %s", gone, idle)
	}

	// The next request follows again.
	calls, _, _ := f.feed.counts()
	detail(early.ID)
	waitAlive("after a request to an idle console", 1)
	if again, early, _ := f.feed.counts(); again != calls+1 || early != 0 {
		t.Fatalf("%d feed subscriptions after a request to an idle console (%d made before the first request), want %d (0)", again, early, calls+1)
	}
}
