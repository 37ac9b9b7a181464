package asynqbroker_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/brokertest"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

func TestDepth(t *testing.T) {
	t.Parallel()
	brokertest.RunDepth(t, func(t *testing.T) broker.Queue {
		q, _ := newQueue(t, redistest.Client(t), nil)
		return q
	})
}
