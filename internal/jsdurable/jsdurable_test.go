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

// TestRetry: an attempt's deadline and a stream not found (a concurrent
// creation still settling) are tried again; any other error, or success,
// ends it at once.
func TestRetry(t *testing.T) {
	notFound := fmt.Errorf("natskv: owner bucket: %w", &jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound, Description: "stream not found"})
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
		"never found":        {errs: slices.Repeat([]error{notFound}, 30), want: jetstream.ErrStreamNotFound, calls: 21},
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
