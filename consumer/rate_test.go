package consumer_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Two workers on connections of their own to one NATS server, 40 slots
// each, serve a tool limited to 5 starts a second; 30 calls at once start
// at most 5 in any second, none fails, none uses a second attempt, and the
// waiting ones say why in their statusMessage, which the take clears.
func TestRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	limit := consumer.Rate{N: 5, Per: time.Second}
	var mu sync.Mutex
	var starts []time.Time
	for _, id := range []string{"w1", "w2"} {
		s := n.Connect(t)
		mux := consumer.NewMux()
		consumer.Handle(mux, consumer.Tool{Name: "geocode", RateLimit: limit},
			func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return consumer.TextResult("ok"), nil
			})
		w := consumer.New(backend.Backend{Queue: s.Queue, Bus: s.Bus, Store: s.Store, Catalog: s.Store}, &consumer.Config{Concurrency: 40, ID: id})
		testenv.RunWorker(t, w, mux)
		<-w.Ready()
	}
	s := n.Connect(t)
	if info, err := s.Store.Tool(t.Context(), "geocode"); err != nil || info.RateLimit == nil || *info.RateLimit != limit {
		t.Fatalf("the catalog entry of geocode: %+v, %v; want its rate limit %s", info, err, limit)
	}
	prod := producer.New(s.Store, producer.QueueExecutor{Queue: s.Queue, Bus: s.Bus}, nil)
	ids := make([]string, 30)
	for i := range ids {
		tk, err := prod.Create(t.Context(), &producer.Request{Tool: "geocode", Arguments: []byte(`{}`), Era: taskstate.Era20260728})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = tk.ID
	}
	waited := false
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		ch, err := s.Store.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var last *taskstate.Task
		for tk := range ch {
			last = tk
			waited = waited || tk.StatusMessage == consumer.RateWait("geocode", limit)
		}
		cancel()
		if last == nil || last.Status != taskstate.Completed || last.Attempt != 1 || last.StatusMessage != "" {
			t.Fatalf("task %s ended as %+v, want completed on its first attempt with no statusMessage", id, last)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	t.Logf("%d starts over %s, at most %d in any %s", len(starts), starts[len(starts)-1].Sub(starts[0]).Round(time.Millisecond), testenv.MaxInWindow(starts, limit.Per), limit.Per)
	if len(starts) != 30 {
		t.Fatalf("%d handler starts for 30 tasks", len(starts))
	}
	if most := testenv.MaxInWindow(starts, limit.Per); most > limit.N {
		t.Fatalf("%d starts in one window of %s, over the limit of %s", most, limit.Per, limit)
	}
	if !waited {
		t.Fatalf("no task showed the statusMessage %q while it waited", consumer.RateWait("geocode", limit))
	}
}

// plainStore is a Store with no optional ability: no RateLimiter.
type plainStore struct{ taskstate.Store }

// A worker whose store keeps no rate limits refuses to run a rate-limited
// tool, saying why, instead of limiting per process.
func TestRateLimitNeedsTheStore(t *testing.T) {
	t.Parallel()
	s := testenv.StartNATS(t).Connect(t)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "geocode", RateLimit: consumer.Rate{N: 1, Per: time.Second}},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) { return nil, nil })
	w := consumer.New(backend.Backend{Queue: s.Queue, Bus: s.Bus, Store: plainStore{s.Store}}, nil)
	err := w.Run(t.Context(), mux)
	if err == nil || !strings.Contains(err.Error(), "keeps none") {
		t.Fatalf("Run on a store without rate limits = %v, want an error saying it keeps none", err)
	}
}
