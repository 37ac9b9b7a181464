// Package demo holds the example tools that `go run ./cmd/api` and
// cmd/worker serve: small, but each shows one thing a handler can do.
package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpqueue/mcpqueue/consumer"
)

type GreetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type ReportArgs struct {
	Title string `json:"title" jsonschema:"report title"`
	Pages int    `json:"pages" jsonschema:"number of pages to render (1-50)"`
}

type Report struct {
	Title   string `json:"title"`
	Pages   int    `json:"pages"`
	Summary string `json:"summary"`
}

type WaitArgs struct {
	Ms int `json:"ms" jsonschema:"how long to wait, in milliseconds"`
}

type FailArgs struct {
	Message string `json:"message,omitempty" jsonschema:"the error to report"`
}

// Register adds the demo tools to mux.
func Register(mux *consumer.Mux) {
	consumer.Handle(mux, consumer.Tool{
		Name: "greet", Title: "Greet", Description: "Says hello. Always answers inline, never as a task.",
		TaskSupport: consumer.TaskForbidden,
	}, func(ctx context.Context, c *consumer.Call[GreetArgs]) (*consumer.Result, error) {
		return consumer.TextResult("Hello, " + c.Args.Name + "!"), nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "render_report", Title: "Render report",
		Description: "Renders a report page by page (about 200 ms a page), reporting progress. Runs as a task when the client supports tasks.",
		Timeout:     5 * time.Minute,
	}, func(ctx context.Context, c *consumer.Call[ReportArgs]) (Report, error) {
		if c.Args.Pages < 1 || c.Args.Pages > 50 {
			return Report{}, consumer.ToolError(fmt.Errorf("pages must be between 1 and 50, got %d", c.Args.Pages))
		}
		for i := 1; i <= c.Args.Pages; i++ {
			// A span of the handler's own, from the global tracer: it joins
			// the task's trace (worker.Run sets the global provider).
			_, span := otel.Tracer("github.com/mcpqueue/mcpqueue/examples/demo").Start(ctx, "render page",
				trace.WithAttributes(attribute.Int("page", i)))
			err := sleep(ctx, 200*time.Millisecond)
			span.End()
			if err != nil {
				return Report{}, err
			}
			_ = c.Progress(ctx, float64(i), float64(c.Args.Pages), fmt.Sprintf("rendered page %d of %d", i, c.Args.Pages))
		}
		return Report{Title: c.Args.Title, Pages: c.Args.Pages, Summary: fmt.Sprintf("%q: %d pages rendered", c.Args.Title, c.Args.Pages)}, nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "wait", Title: "Wait", Description: "Waits the given number of milliseconds, then reports how long it waited. Cancellable.",
		Timeout: 10 * time.Minute,
	}, func(ctx context.Context, c *consumer.Call[WaitArgs]) (*consumer.Result, error) {
		_ = c.Progress(ctx, 0, 0, fmt.Sprintf("waiting %d ms", c.Args.Ms))
		if err := sleep(ctx, time.Duration(c.Args.Ms)*time.Millisecond); err != nil {
			c.Logger().Info().Err(context.Cause(ctx)).Msg("wait: handler observed cancellation")
			return nil, err
		}
		return consumer.TextResult(fmt.Sprintf("waited %d ms (attempt %d)", c.Args.Ms, c.Attempt())), nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "noop", Title: "No-op", Description: "Does nothing and answers ok: the queue's own cost, for benchmarks.",
	}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		return consumer.TextResult("ok"), nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "fail", Title: "Fail", Description: "Always fails with a tool error (isError: true).",
	}, func(ctx context.Context, c *consumer.Call[FailArgs]) (*consumer.Result, error) {
		msg := c.Args.Message
		if msg == "" {
			msg = "this tool always fails"
		}
		return nil, consumer.ToolError(errors.New(msg))
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
