package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
)

// DivideArgs are the arguments of the divide tool.
type DivideArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// Quotient is the divide tool's result.
type Quotient struct {
	Q int `json:"q"`
}

// Middleware wraps every run of a Mux's entries, those registered after
// Use too. Here: one that logs each call and how it ended, one that counts
// outcomes the way a metrics middleware would, and one that recovers a
// panic (an integer division by zero) into a tool error the model sees;
// without it the worker recovers the panic itself and fails the task. The
// first middleware is the outermost: the counter sees the recovered panic
// as the tool error it became.
func ExampleMux_Use() {
	logging := func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			fmt.Printf("%s %s attempt %d\n", req.Name(), req.Arguments(), req.Attempt())
			res, err := next(ctx, req)
			fmt.Printf("  err: %v\n", err)
			return res, err
		}
	}

	var ok, toolErrors, failures atomic.Int64
	metrics := func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			res, err := next(ctx, req)
			var te *consumer.ToolExecutionError
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &te):
				toolErrors.Add(1)
			default:
				failures.Add(1)
			}
			return res, err
		}
	}

	recovering := func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (res json.RawMessage, err error) {
			defer func() {
				if p := recover(); p != nil {
					res, err = nil, consumer.ToolError(fmt.Errorf("%s failed: %v", req.Name(), p))
				}
			}()
			return next(ctx, req)
		}
	}

	mux := consumer.NewMux()
	mux.Use(logging, metrics, recovering)
	consumer.Handle(mux, consumer.Tool{Name: "divide"},
		func(ctx context.Context, c *consumer.Call[DivideArgs]) (Quotient, error) {
			if c.Args.A < 0 {
				return Quotient{}, consumer.ToolError(errors.New("a must not be negative"))
			}
			return Quotient{Q: c.Args.A / c.Args.B}, nil
		})

	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		for _, args := range []DivideArgs{{A: 6, B: 3}, {A: -1, B: 1}, {A: 1, B: 0}} {
			out, err := h.Call(ctx, "divide", args)
			if err != nil {
				return err
			}
			fmt.Printf("  %s isError=%t %s\n", out.Status, out.Result.IsError, out.Text())
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("ok %d, tool errors %d, failures %d\n", ok.Load(), toolErrors.Load(), failures.Load())
	// Output:
	// divide {"a":6,"b":3} attempt 1
	//   err: <nil>
	//   completed isError=false {"q":2}
	// divide {"a":-1,"b":1} attempt 1
	//   err: a must not be negative
	//   completed isError=true a must not be negative
	// divide {"a":1,"b":0} attempt 1
	//   err: divide failed: runtime error: integer divide by zero
	//   completed isError=true divide failed: runtime error: integer divide by zero
	// ok 1, tool errors 2, failures 0
}
