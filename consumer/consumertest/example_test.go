package consumertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
)

type CountArgs struct {
	Text string `json:"text"`
}

type Count struct {
	Words int `json:"words"`
}

// A handler called with arguments, and its typed result; a handler's
// consumer.ToolError completes the call with a result the model sees:
// IsError set, the error's message as its text. In a test, New(t,
// mux, nil) starts the harness and closes it when the test ends; Start and
// Close do the same by hand, and With around a function (the other examples
// use it).
func ExampleHarness_Call() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "word_count"},
		func(ctx context.Context, c *consumer.Call[CountArgs]) (Count, error) {
			return Count{Words: len(strings.Fields(c.Args.Text))}, nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "read_file"},
		func(ctx context.Context, c *consumer.Call[DeleteArgs]) (*consumer.Result, error) {
			b, err := os.ReadFile(c.Args.Path)
			if errors.Is(err, os.ErrNotExist) {
				return nil, consumer.ToolError(fmt.Errorf("no file %s: list the directory first", c.Args.Path))
			}
			if err != nil {
				return nil, err
			}
			return consumer.TextResult(string(b)), nil
		})

	ctx := context.Background()
	h, err := consumertest.Start(ctx, mux, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	out, err := h.Call(ctx, "word_count", CountArgs{Text: "the quick brown fox"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var got Count
	if err := out.Decode(&got); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Status, got.Words)

	out, err = h.Call(ctx, "read_file", DeleteArgs{Path: "/no/such/file"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Status, out.Result.IsError, out.Text())
	// Output:
	// completed 4
	// completed true no file /no/such/file: list the directory first
}

type DeleteArgs struct {
	Path string `json:"path"`
}

// A handler that asks the user (Call.Elicit) gets the scripted answer; a
// request without one leaves the call waiting (input_required) until
// Run.Answer gives it.
func ExampleAnswer() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "delete"},
		func(ctx context.Context, c *consumer.Call[DeleteArgs]) (*consumer.Result, error) {
			r, err := c.Elicit(ctx, "confirm", "Delete "+c.Args.Path+"?", map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			if r.Action != "accept" {
				return consumer.TextResult("kept " + c.Args.Path), nil
			}
			return consumer.TextResult("deleted " + c.Args.Path), nil
		})
	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		out, err := h.Call(ctx, "delete", DeleteArgs{Path: "/tmp/a"},
			consumertest.Answer("confirm", consumer.ElicitResult{Action: "accept"}))
		if err != nil {
			return err
		}
		fmt.Println(out.Text())

		// Unscripted: the call waits, the request is there to see.
		run, err := h.Start(ctx, "delete", DeleteArgs{Path: "/tmp/b"})
		if err != nil {
			return err
		}
		out, _ = run.Wait(ctx)
		fmt.Println(out.Status, run.Requests()[0].Method)
		_ = run.Answer("confirm", consumer.ElicitResult{Action: "decline"})
		out, _ = run.Wait(ctx)
		fmt.Println(out.Text())
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// deleted /tmp/a
	// input_required elicitation/create
	// kept /tmp/b
}

// Progress reports (Call.Progress) as the client would receive them.
func ExampleRun_Progress() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "pages"},
		func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
			for i := 1; i <= 3; i++ {
				if err := c.Progress(ctx, float64(i), 3, fmt.Sprintf("page %d", i)); err != nil {
					return nil, err
				}
			}
			return consumer.TextResult("done"), nil
		})
	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		run, err := h.Start(ctx, "pages", struct{}{})
		if err != nil {
			return err
		}
		out, err := run.Wait(ctx) // every report is heard once Wait returns
		if err != nil {
			return err
		}
		for _, p := range run.Progress() {
			fmt.Println(p.Progress, p.Total, p.Message)
		}
		fmt.Println(out.Status, out.StatusMessage)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 1 3 page 1
	// 2 3 page 2
	// 3 3 page 3
	// completed page 3
}

// Cancelling a running call, as tasks/cancel does: the handler's context
// ends with cause consumer.ErrTaskCancelled, and Wait returns once the
// handler has.
func ExampleRun_Cancel() {
	saw := make(chan error, 1)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "forever"},
		func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
			_ = c.Progress(ctx, 0, 0, "started")
			<-ctx.Done()
			saw <- context.Cause(ctx)
			return nil, ctx.Err()
		})
	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		run, err := h.Start(ctx, "forever", struct{}{})
		if err != nil {
			return err
		}
		if _, err := run.WaitProgress(ctx, 1); err != nil { // it runs
			return err
		}
		if err := run.Cancel(ctx); err != nil {
			return err
		}
		out, err := run.Wait(ctx)
		if err != nil {
			return err
		}
		fmt.Println(out.Status, errors.Is(<-saw, consumer.ErrTaskCancelled))
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: cancelled true
}
