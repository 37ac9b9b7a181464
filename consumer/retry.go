package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Retryable marks err as the failure of this run rather than of the call:
// the run ends as if its worker had crashed. While the tool's attempts last
// the job runs again (after a short backoff, here or on another worker),
// with the task's statusMessage saying why; the last attempt fails the task
// with err's message. A handler that relays calls to another process
// returns it when that process dies mid-call (package bridge). An error the
// model should see instead is a ToolError (which says when to use which).
// Retryable(nil) is nil.
//
// A Retryable error runs the handler again even for a tool that is not
// safe to repeat (Tool.Redeliver): returning it is the handler's choice.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{err}
}

// RetryableError is the error Retryable returns: the failure of one run,
// after which the job runs again while the tool's attempts last. Test for
// one with errors.As, in a middleware (see Mux.Use) say; make one with
// Retryable.
type RetryableError struct{ err error }

// Error is the message of the error Retryable was given.
func (e *RetryableError) Error() string { return e.err.Error() }

// Unwrap returns the error Retryable was given.
func (e *RetryableError) Unwrap() error { return e.err }

// retry hands the job back for another attempt if herr is Retryable and
// attempts remain (done: the job is dealt with). On the last attempt it
// returns the error to fail the task with instead.
func (w *Worker) retry(io context.Context, log zerolog.Logger, cs *callState, d broker.Delivery, herr error, attempts int) (done bool, _ error) {
	var re *RetryableError
	if !errors.As(herr, &re) {
		return false, herr
	}
	if cs.attempt >= attempts {
		return false, fmt.Errorf("%w (attempt %d of %d)", re.err, cs.attempt, attempts)
	}
	msg := fmt.Sprintf("attempt %d of %d failed, retrying: %v", cs.attempt, attempts, re.err)
	_, err := cs.mutate(io, func(t *taskstate.Task) error {
		if t.Status.Terminal() {
			return taskstate.ErrSkip
		}
		t.Lease = nil // the next run need not wait for this one's lease
		t.StatusMessage = msg
		t.Retries++ // this run ended on purpose (see Redeliver)
		return nil
	})
	switch {
	case errors.Is(err, ErrFenced):
		return true, nil // another run holds the task, maybe this very job
	case errors.Is(err, taskstate.ErrSkip), errors.Is(err, taskstate.ErrInvalidChange):
		return false, herr // ended meanwhile (cancelled): finish acks
	case err != nil:
		log.Error().Err(err).Msg("recording the failed attempt; retrying the job")
	}
	log.Warn().Err(re.err).Int("attempt", cs.attempt).Int("attempts", attempts).Msg("run failed; the job runs again")
	_ = d.Retry(io, backoff(cs.attempt))
	return true, nil
}
