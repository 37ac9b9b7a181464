package jsdurable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
)

// TestRetry: an attempt's deadline, a stream not found (a concurrent
// creation still settling) and replicas without peers (a cluster starting)
// are tried again, a bounded number of times; any other error, or success,
// ends it at once.
func TestRetry(t *testing.T) {
	notFound := fmt.Errorf("natskv: owner bucket: %w", &jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound, Description: "stream not found"})
	noPeers := fmt.Errorf("natskv: owner bucket: %w", &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"})
	other := errors.New("nats: permissions violation")
	for name, c := range map[string]struct {
		errs  []error
		want  error
		calls int
	}{
		"success":            {errs: []error{nil}, calls: 1},
		"deadline, then ok":  {errs: []error{context.DeadlineExceeded, nil}, calls: 2},
		"not found, then ok": {errs: []error{notFound, notFound, nil}, calls: 3},
		"sentinel not found": {errs: []error{jetstream.ErrStreamNotFound, nil}, calls: 2},
		"other error":        {errs: []error{other, nil}, want: other, calls: 1},
		"never found":        {errs: slices.Repeat([]error{notFound}, 60), want: jetstream.ErrStreamNotFound, calls: 51},
		"no peers, then ok":  {errs: []error{noPeers, noPeers, nil}, calls: 3},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := jsdurable.Retry(context.Background(), func(context.Context) error {
				calls++
				return c.errs[calls-1]
			})
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) || calls != c.calls {
				t.Fatalf("Retry = %v after %d calls, want %v after %d", err, calls, c.want, c.calls)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := jsdurable.Retry(ctx, func(context.Context) error { return notFound }); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Retry with its context ended = %v, want the last error", err)
	}
}
