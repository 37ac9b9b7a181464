package demo

import (
	"context"
	"testing"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
)

// confirm_action goes ahead only on an accepted yes.
func TestConfirmAction(t *testing.T) {
	mux := consumer.NewMux()
	Register(mux)
	err := consumertest.With(context.Background(), mux, nil, func(ctx context.Context, h *consumertest.Harness) error {
		for _, c := range []struct {
			answer consumer.ElicitResult
			want   string
		}{
			{consumer.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, "Confirmed: rotate the keys"},
			{consumer.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, "Not done: rotate the keys (the user said no)"},
			{consumer.ElicitResult{Action: "decline"}, "Not done: rotate the keys (the user said no)"},
		} {
			out, err := h.Call(ctx, "confirm_action", ConfirmArgs{Action: "rotate the keys"}, consumertest.Answer("confirm", c.answer))
			if err != nil {
				return err
			}
			if out.Text() != c.want {
				t.Errorf("answer %+v: %q, want %q", c.answer, out.Text(), c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
