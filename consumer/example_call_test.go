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
