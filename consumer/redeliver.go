package consumer

import (
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Redeliver says whether a task of a tool runs again after a run of it
// that did not finish: its worker died (kill -9, a crash, the machine
// gone), lost its lease (paused or cut off for longer than the lease), or
// was stopped past its ShutdownGrace while the handler ran on. Such a run
// may have done part or all of what the tool does, so running the handler
// again repeats it.
//
// A tool that is not run again fails the task instead, with a
// statusMessage saying that the worker died while running a tool that is
// not safe to repeat; its handler is not called. A handler that kept a
// checkpoint (Call.Checkpoint) is run again all the same: it can Restore
// what it did and carry on from there. A handler that returns a Retryable
// error chose to run again, and does, whatever Redeliver says. Runs that
// park (Tool.ParkAfter) finished on purpose: their tasks resume as always.
type Redeliver int

const (
	// RedeliverAuto (the default) follows the tool's Annotations (MCP tool
	// annotations): a tool annotated idempotentHint: false, or
	// destructiveHint: true without idempotentHint: true, is not run
	// again, unless it is also annotated readOnlyHint: true (it changes
	// nothing, so it is safe). Every other tool, unannotated ones
	// included, is run again, while its attempts (Tool.MaxAttempts) last.
	//
	// The go-sdk (modelcontextprotocol/go-sdk) writes idempotentHint
	// whenever a tool has annotations at all, so a go-sdk tool relayed by
	// package bridge or gosdk with any annotation but idempotentHint or
	// readOnlyHint true is not run again.
	RedeliverAuto Redeliver = iota
	// RedeliverAlways runs the tool again, whatever its annotations say
	// (it is safe to repeat, or its effects are undone elsewhere).
	RedeliverAlways
	// RedeliverNever never runs the tool again, whatever its annotations
	// say (unless its handler checkpointed).
	RedeliverNever
)

// String is the constant's name.
func (r Redeliver) String() string {
	switch r {
	case RedeliverAuto:
		return "RedeliverAuto"
	case RedeliverAlways:
		return "RedeliverAlways"
	case RedeliverNever:
		return "RedeliverNever"
	}
	return fmt.Sprintf("Redeliver(%d)", int(r))
}

// The annotations RedeliverAuto reads.
const (
	hintReadOnly    = "readOnlyHint"
	hintIdempotent  = "idempotentHint"
	hintDestructive = "destructiveHint"
)

// noRepeat is why an unfinished run of tool t is not run again, as the
// failed task's statusMessage says it ("idempotentHint: false"); "" if it
// is run again. An unknown Redeliver, or a hint RedeliverAuto reads that is
// not a boolean, is an error naming it.
func noRepeat(t Tool) (string, error) {
	hints := map[string]*bool{hintReadOnly: nil, hintIdempotent: nil, hintDestructive: nil}
	for name := range hints {
		switch v := t.Annotations[name].(type) {
		case nil: // absent, or JSON null: not annotated
		case bool:
			hints[name] = &v
		default:
			return "", fmt.Errorf("annotation %s is %T %v, want a boolean", name, v, v)
		}
	}
	is := func(name string, want bool) bool { return hints[name] != nil && *hints[name] == want }
	switch t.Redeliver {
	case RedeliverAlways:
		return "", nil
	case RedeliverNever:
		return "Redeliver: RedeliverNever", nil
	case RedeliverAuto:
	default:
		return "", fmt.Errorf("unknown Redeliver %d (want RedeliverAuto, RedeliverAlways or RedeliverNever)", int(t.Redeliver))
	}
	switch {
	case is(hintReadOnly, true):
		return "", nil
	case is(hintIdempotent, false):
		return hintIdempotent + ": false", nil
	case is(hintDestructive, true) && !is(hintIdempotent, true):
		return hintDestructive + ": true", nil
	}
	return "", nil
}

// unfinished reports whether a run of t ended without finishing: it took
// the task (an attempt) and neither parked, nor chose to run again
// (Retryable), nor wrote an outcome (t is not terminal), nor was handed
// back by a shutdown that let it finish (that take is undone).
func unfinished(t *taskstate.Task) bool { return t.Runs() > t.Retries }

// notRepeated is the statusMessage of a task whose run of attempt ended
// as what says ("died", "shut down before it finished") and that is not
// run again, for why (noRepeat).
func notRepeated(tool string, attempt int, what, why string) string {
	return fmt.Sprintf("the worker running tool %q %s (attempt %d); %s is not safe to repeat (%s), so it was not run again",
		tool, what, attempt, tool, why)
}

// checkpointed reports whether the task's record, as this run last saw it,
// holds a checkpoint (Call.Checkpoint).
func (c *callState) checkpointed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rec != nil && len(c.rec.Checkpoint) > 0
}
