package consumer_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
)

type GeocodeArgs struct {
	Address string `json:"address"`
}

// A tool that calls an upstream API which allows 2 requests per 200ms: its
// RateLimit holds for every worker on the store (here the in-memory one of
// consumertest; NATS KV or Redis in a deployment). Four calls at once all
// complete, none fails; the ones over the limit wait, queued, with the
// statusMessage consumer.RateWait gives, and starts are spaced 100ms apart
// (and 5%).
func ExampleRate() {
	limit := consumer.Rate{N: 2, Per: 200 * time.Millisecond}
	var mu sync.Mutex
	var starts []time.Time
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "geocode", RateLimit: limit},
		func(ctx context.Context, c *consumer.Call[GeocodeArgs]) (*consumer.Result, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return consumer.TextResult("52.52,13.40"), nil
		})

	ctx := context.Background()
	h, err := consumertest.Start(ctx, mux, &consumer.Config{Concurrency: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	var wg sync.WaitGroup
	status := make([]string, 4)
	for i := range status {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := h.Call(ctx, "geocode", GeocodeArgs{Address: "Unter den Linden 1"})
			if err != nil {
				status[i] = err.Error()
				return
			}
			status[i] = string(out.Status)
		}()
	}
	wg.Wait()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	fmt.Println(status)
	fmt.Println("third start a window after the first:", starts[2].Sub(starts[0]) >= limit.Per)
	fmt.Println(consumer.RateWait("geocode", limit))
	// Output:
	// [completed completed completed completed]
	// third start a window after the first: true
	// waiting for tool "geocode"'s rate limit (2 per 200ms)
}
