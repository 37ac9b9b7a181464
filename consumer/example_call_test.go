package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
)

// Ask sends several requests at once and returns the answers in order, as
// raw JSON; each request's key is what the answers are matched by. Elicit is
// the one-request form that decodes the answer (consumertest's ExampleAnswer
// shows it, and a call left waiting for its answer).
func ExampleCall_Ask() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "window"},
		func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
			schema := map[string]any{"type": "object", "properties": map[string]any{"at": map[string]any{"type": "string"}}}
			answers, err := c.Ask(ctx,
				consumer.Elicitation("start", "When may the maintenance start?", schema),
				consumer.Elicitation("end", "When must it end?", schema))
			if err != nil {
				return nil, err
			}
			var start, end consumer.ElicitResult
			if err := json.Unmarshal(answers[0], &start); err != nil {
				return nil, err
			}
			if err := json.Unmarshal(answers[1], &end); err != nil {
				return nil, err
			}
			return consumer.TextResult(fmt.Sprintf("%v to %v", start.Content["at"], end.Content["at"])), nil
		})

	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		out, err := h.Call(ctx, "window", struct{}{},
			consumertest.Answer("start", consumer.ElicitResult{Action: "accept", Content: map[string]any{"at": "02:00"}}),
			consumertest.Answer("end", consumer.ElicitResult{Action: "accept", Content: map[string]any{"at": "04:00"}}))
		if err != nil {
			return err
		}
		fmt.Println(out.Text())
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 02:00 to 04:00
}

// ArgsWithHeaders mirror region in the Mcp-Param-Region header (SEP-2243):
// the api refuses a call whose header disagrees with the arguments.
type ArgsWithHeaders struct {
	Region string `json:"region" mcpheader:"Region"`
	Query  string `json:"query"`
}

// A field tagged mcpheader is marked x-mcp-header in the tool's input
// schema, which is what tells a client to send the header; the handler
// reads the value from its arguments like any other.
func ExampleHandle_headers() {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "execute_sql"},
		func(ctx context.Context, c *consumer.Call[ArgsWithHeaders]) (*consumer.Result, error) {
			return consumer.TextResult("ran in " + c.Args.Region), nil
		})
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(mux.Tools()[0].InputSchema, &schema)
	fmt.Println(schema.Properties["region"]["x-mcp-header"])

	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		out, err := h.Call(ctx, "execute_sql", ArgsWithHeaders{Region: "eu-west-1", Query: "SELECT 1"})
		if err != nil {
			return err
		}
		fmt.Println(out.Status, out.Text())
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// Region
	// completed ran in eu-west-1
}
