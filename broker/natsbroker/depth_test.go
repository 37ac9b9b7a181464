package natsbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/brokertest"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

func TestDepth(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	brokertest.RunDepth(t, func(t *testing.T) broker.Queue {
		_, js := srv.Connect(t)
		name := natstest.Name(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		q, err := natsbroker.NewQueue(ctx, js, &natsbroker.Config{Stream: name + "_JOBS", Subject: name + ".jobs"})
		if err != nil {
			t.Fatalf("NewQueue: %v", err)
		}
		return q
	})
}
