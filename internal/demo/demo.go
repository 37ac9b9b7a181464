// Package demo holds the demo tools that `go run ./cmd/api` and cmd/worker
// serve: small, but each shows one thing a handler can do. It is internal
// because the binaries register it and nothing may import examples/; the
// examples users copy from are under examples/.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// GreetArgs is the greet tool's arguments.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// ReportArgs is the report tool's arguments.
type ReportArgs struct {
	Title string `json:"title" jsonschema:"report title"`
	Pages int    `json:"pages" jsonschema:"number of pages to render (1-50)"`
}

// Report is the report tool's result.
type Report struct {
	Title   string `json:"title"`
	Pages   int    `json:"pages"`
	Summary string `json:"summary"`
}

// WaitArgs is the wait tool's arguments.
type WaitArgs struct {
	Ms int `json:"ms" jsonschema:"how long to wait, in milliseconds"`
}

// BlobArgs is the blob tool's arguments.
type BlobArgs struct {
	Bytes int    `json:"bytes" jsonschema:"how many bytes to return"`
	Kind  string `json:"kind,omitempty" jsonschema:"text (the default): that many characters; image: that many bytes of a PNG-typed image"`
	Echo  string `json:"echo,omitempty" jsonschema:"returned as the result's second text block, so large arguments can be checked"`
}

// ExportArgs is the export tool's arguments.
type ExportArgs struct {
	Bytes int    `json:"bytes" jsonschema:"the size of the export, in bytes"`
	Name  string `json:"name,omitempty" jsonschema:"the artifact's name (default export.bin)"`
}

// FailArgs is the fail tool's arguments.
type FailArgs struct {
	Message string `json:"message,omitempty" jsonschema:"the error to report"`
}

// ConfirmArgs is the confirm_action tool's arguments.
type ConfirmArgs struct {
	Action string `json:"action" jsonschema:"what to do once the user agrees, e.g. delete the old backups"`
}

// Register adds the demo tools to mux.
func Register(mux *consumer.Mux) {
	registerQuick(mux)
	registerLong(mux)
	registerLarge(mux)
	registerInput(mux)
}

// registerQuick adds the tools that answer at once: greet, noop, fail.
func registerQuick(mux *consumer.Mux) {
	consumer.Handle(mux, consumer.Tool{
		Name: "greet", Title: "Greet", Description: "Says hello. Always answers inline, never as a task.",
		TaskSupport: consumer.TaskForbidden,
	}, func(ctx context.Context, c *consumer.Call[GreetArgs]) (*consumer.Result, error) {
		return consumer.TextResult("Hello, " + c.Args.Name + "!"), nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "noop", Title: "No-op", Description: "Does nothing and answers ok: the queue's own cost, for benchmarks.",
	}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		return consumer.TextResult("ok"), nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "fail", Title: "Fail", Description: "Always fails with a tool error (isError: true).",
	}, func(ctx context.Context, c *consumer.Call[FailArgs]) (*consumer.Result, error) {
		return nil, consumer.ToolError(errors.New(cmp.Or(c.Args.Message, "this tool always fails")))
	})
}

// registerLong adds the tools that take a while: render_report, wait.
func registerLong(mux *consumer.Mux) {
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
			_, span := otel.Tracer("github.com/mcpqueue/mcpqueue/internal/demo").Start(ctx, "render page",
				trace.WithAttributes(attribute.Int("page", i)))
			err := procs.Sleep(ctx, 200*time.Millisecond)
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
		if err := procs.Sleep(ctx, time.Duration(c.Args.Ms)*time.Millisecond); err != nil {
			c.Logger().Info().Err(context.Cause(ctx)).Msg("wait: handler observed cancellation")
			return nil, err
		}
		return consumer.TextResult(fmt.Sprintf("waited %d ms (attempt %d)", c.Args.Ms, c.Attempt())), nil
	})

}

// registerLarge adds the tools with large results: blob, export.
func registerLarge(mux *consumer.Mux) {
	consumer.Handle(mux, consumer.Tool{
		Name: "blob", Title: "Blob", Description: "Returns as many bytes as asked: text, or an image. For tests and benchmarks of large results.",
	}, func(ctx context.Context, c *consumer.Call[BlobArgs]) (*consumer.Result, error) {
		if c.Args.Bytes < 0 {
			return nil, consumer.ToolError(errors.New("bytes must not be negative"))
		}
		c.Logger().Info().Int("bytes", c.Args.Bytes).Str("kind", c.Args.Kind).Msg("blob: producing the result")
		var res *consumer.Result
		switch c.Args.Kind {
		case "", "text":
			res = consumer.TextResult(pattern(c.Args.Bytes))
		case "image":
			res = &consumer.Result{Content: []consumer.Content{consumer.Image([]byte(pattern(c.Args.Bytes)), "image/png")}}
		default:
			return nil, consumer.ToolError(fmt.Errorf("kind %q: want text or image", c.Args.Kind))
		}
		if c.Args.Echo != "" {
			res.Content = append(res.Content, consumer.Text(c.Args.Echo))
		}
		return res, nil
	})

	consumer.Handle(mux, consumer.Tool{
		Name: "export", Title: "Export", Description: "Writes an export of the given size as an artifact of the task and returns a link to it (read it with resources/read).",
	}, func(ctx context.Context, c *consumer.Call[ExportArgs]) (*consumer.Result, error) {
		link, err := c.Artifact(ctx, cmp.Or(c.Args.Name, "export.bin"), "application/octet-stream", strings.NewReader(pattern(c.Args.Bytes)))
		if err != nil {
			return nil, err
		}
		return &consumer.Result{Content: []consumer.Content{consumer.Text(fmt.Sprintf("exported %d bytes", c.Args.Bytes)), link}}, nil
	})
}

// registerInput adds the tool that asks the user: confirm_action.
func registerInput(mux *consumer.Mux) {
	consumer.Handle(mux, consumer.Tool{
		Name: "confirm_action", Title: "Confirm action",
		Description: "Asks the user whether to go ahead with the action (an elicitation: a task waits input_required for the answer), then says what was decided. Nothing is really done.",
	}, func(ctx context.Context, c *consumer.Call[ConfirmArgs]) (*consumer.Result, error) {
		schema := map[string]any{"type": "object", "required": []string{"confirm"}, "properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": "Go ahead?"},
		}}
		r, err := c.Elicit(ctx, "confirm", fmt.Sprintf("Go ahead with %q?", c.Args.Action), schema)
		if err != nil {
			return nil, err
		}
		if ok, _ := r.Content["confirm"].(bool); r.Action != "accept" || !ok {
			return consumer.TextResult(fmt.Sprintf("Not done: %s (the user said no)", c.Args.Action)), nil
		}
		return consumer.TextResult("Confirmed: " + c.Args.Action), nil
	})

}

// pattern is n bytes of a repeating, checkable ASCII pattern: "0123456789…".
func pattern(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0' + byte(i%10)
	}
	return string(b)
}
