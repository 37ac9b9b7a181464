package producer_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Calls with one idempotency key on two producers over one store (two api
// replicas), sequential and racing: one task, one job; the same key with
// other arguments is ErrKeyReused; another owner's key is another task.
func TestIdempotencyKeyOneTask(t *testing.T) {
	st := newStore(t)
	execA, execB := &recorder{}, &recorder{}
	replicas := []*producer.Producer{producer.New(st, execA, nil), producer.New(st, execB, nil)}
	req := func(args string) *producer.Request {
		return &producer.Request{Tool: "wait", Arguments: json.RawMessage(args), Owner: "alice", IdempotencyKey: "call-1"}
	}

	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]int{}
		created int
	)
	for i := range n {
		wg.Go(func() {
			tk, fresh, err := replicas[i%2].CreateOrGet(t.Context(), req(`{"ms":5}`))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("CreateOrGet: %v", err)
				return
			}
			ids[tk.ID]++
			if fresh {
				created++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || created != 1 {
		t.Fatalf("%d racing calls with one key: task ids %v, %d created; want one id, created once", n, ids, created)
	}
	jobs := append(execA.jobs(), execB.jobs()...)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs started for one key, want 1", len(jobs))
	}
	var id string
	for id = range ids {
	}
	if want := taskstate.IdempotentID("alice", "call-1", ""); id != want {
		t.Fatalf("task id %s, want IdempotentID %s", id, want)
	}

	// Sequential retry, arguments in another order and spacing: same task, no job.
	again, fresh, err := replicas[1].CreateOrGet(t.Context(), req(` { "ms" : 5 } `))
	if err != nil || fresh || again.ID != id {
		t.Fatalf("retry: task %v, created %v, err %v; want task %s, not created", again, fresh, err, id)
	}
	rec, err := st.Get(t.Context(), id)
	if err != nil || rec.IdempotencyKey != "call-1" || rec.InputDigest != taskstate.InputDigest("", "wait", json.RawMessage(`{"ms":5}`)) {
		t.Fatalf("record %+v (%v): want the key and the call's digest", rec, err)
	}

	// The same key for another call: refused, nothing started.
	for _, other := range []*producer.Request{req(`{"ms":6}`), {Tool: "noop", Arguments: json.RawMessage(`{"ms":5}`), Owner: "alice", IdempotencyKey: "call-1"}} {
		tk, _, err := replicas[0].CreateOrGet(t.Context(), other)
		if !errors.Is(err, producer.ErrKeyReused) || !strings.Contains(err.Error(), `"call-1"`) || tk == nil || tk.ID != id {
			t.Fatalf("key reused for %s %s: task %v, err %v; want ErrKeyReused naming the key, with task %s", other.Tool, other.Arguments, tk, err, id)
		}
	}
	// Another owner's same key: another task.
	bob, fresh, err := replicas[0].CreateOrGet(t.Context(), &producer.Request{Tool: "wait", Arguments: json.RawMessage(`{"ms":5}`), Owner: "bob", IdempotencyKey: "call-1"})
	if err != nil || !fresh || bob.ID == id {
		t.Fatalf("bob's call-1: task %v, created %v, err %v; want a task of its own", bob, fresh, err)
	}
	if got := len(execA.jobs()) + len(execB.jobs()); got != 2 {
		t.Fatalf("%d jobs after bob's call, want 2", got)
	}
	// A bad key: refused before anything is written.
	if _, _, err := replicas[0].CreateOrGet(t.Context(), &producer.Request{Tool: "wait", IdempotencyKey: "tab\tkey"}); err == nil || !strings.Contains(err.Error(), "idempotency key") {
		t.Fatalf("bad key: err %v, want an error naming the idempotency key", err)
	}
}

// A call of one key with other (large, blob-kept) arguments leaves the
// first call's arguments alone.
func TestIdempotencyKeyLargeArgsKeepWinners(t *testing.T) {
	st := newStore(t)
	p := producer.New(st, &recorder{}, nil)
	big := func(c string) json.RawMessage {
		return json.RawMessage(`{"text":"` + strings.Repeat(c, taskstate.InlineMax+10) + `"}`)
	}
	first, _, err := p.CreateOrGet(t.Context(), &producer.Request{Tool: "echo", Arguments: big("a"), Owner: "alice", IdempotencyKey: "k"})
	if err != nil || first.ArgumentsRef == nil {
		t.Fatalf("first call: %v, ref %v; want its arguments in a blob", err, first)
	}
	if _, _, err := p.CreateOrGet(t.Context(), &producer.Request{Tool: "echo", Arguments: big("b"), Owner: "alice", IdempotencyKey: "k"}); !errors.Is(err, producer.ErrKeyReused) {
		t.Fatalf("second call with other arguments: %v, want ErrKeyReused", err)
	}
	got, err := taskstate.ReadBlob(t.Context(), st, first.ArgumentsRef.Key)
	if err != nil || !strings.HasPrefix(string(got), `{"text":"aaa`) {
		t.Fatalf("the winner's arguments blob: %.20s (%v), want the first call's", got, err)
	}
}
