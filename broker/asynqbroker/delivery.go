package asynqbroker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
)

type delivery struct {
	job     broker.Job
	attempt int
	last    bool // no delivery may follow this one

	mu      sync.Mutex
	settled bool
	lost    error         // why the delivery was taken back, if it was
	outcome chan error    // the handler's return value; cap 1
	extend  chan struct{} // cap 1
}

func (d *delivery) Job() *broker.Job { return &d.job }
func (d *delivery) Delivered() int   { return d.attempt }

// openLocked is nil while the delivery is the worker's to settle or extend,
// else why not.
func (d *delivery) openLocked() error {
	switch {
	case d.lost != nil:
		return d.lost
	case d.settled:
		return errSettled
	}
	return nil
}

// settle hands the handler its return value, once.
func (d *delivery) settle(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.openLocked(); err != nil {
		return err
	}
	d.settled = true
	d.outcome <- err
	return nil
}

// lose takes the delivery back from the worker; false if it was settled.
func (d *delivery) lose(why error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return false
	}
	if d.lost == nil {
		d.lost = why
	}
	return true
}

func (d *delivery) Ack(context.Context) error { return d.settle(nil) }

func (d *delivery) Retry(_ context.Context, delay time.Duration) error {
	if d.last {
		// Like JetStream past MaxDeliver: the job is not handed out again.
		return d.settle(fmt.Errorf("asynqbroker: retry of the last allowed delivery: %w", asynq.SkipRetry))
	}
	return d.settle(&retryError{delay: delay})
}

var _ broker.Deferrer = (*delivery)(nil)

// Defer returns the job for delay as a retry Asynq does not count.
func (d *delivery) Defer(_ context.Context, delay time.Duration) error {
	return d.settle(&deferError{delay: delay})
}

func (d *delivery) Term(_ context.Context, reason string) error {
	if reason == "" {
		reason = "terminated"
	}
	return d.settle(fmt.Errorf("asynqbroker: %s: %w", reason, asynq.SkipRetry))
}

func (d *delivery) Extend(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.openLocked(); err != nil {
		return err
	}
	select {
	case d.extend <- struct{}{}:
	default: // an extension is already pending
	}
	return nil
}

// logger adapts zerolog to asynq.Logger. Asynq's info lines (server start and
// stop) go out at debug level; Fatal is logged, never exits.
type logger struct{ l zerolog.Logger }

func (a logger) Debug(args ...any) { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a logger) Info(args ...any)  { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a logger) Warn(args ...any)  { a.l.Warn().Msg(fmt.Sprint(args...)) }
func (a logger) Error(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }
func (a logger) Fatal(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }
