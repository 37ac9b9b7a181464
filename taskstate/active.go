package taskstate

import (
	"context"
	"time"
)

// ActiveCounter is an optional ability of a Store: it counts an owner's
// active (not terminal) tasks at a cost that grows with those tasks, not
// with the finished ones it retains. The api's cap on active tasks per
// owner (--max-active-tasks) asks on every tools/call; a Store without it
// is counted by listing the owner's tasks, which reads every record the
// owner has kept (an hour of them by default).
type ActiveCounter interface {
	// CountActive returns how many of owner's tasks are active, or limit
	// when there are at least limit (limit > 0). The count may lag a write
	// that is under way; an index entry left behind by a write that failed
	// halfway is found and dropped before a count reaches limit, so a
	// stale entry never refuses a task on its own. "" owns nothing: 0.
	CountActive(ctx context.Context, owner string, limit int) (int, error)
}

// Leaser is an optional ability of a Store: named leases, each held by one
// holder at a time, for work that one replica of a fleet should do at a
// time (the reaper's passes).
type Leaser interface {
	// Lease takes the lease name for holder, or renews it if holder holds
	// it already, until ttl from now, and reports whether holder holds it.
	// Another holder's lease is not taken before it expires. Names and
	// holders are plain names (ValidLeaseName).
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// ValidLeaseName reports whether s may name a lease or its holder: 1 to 64
// ASCII letters, digits, "_" and "-".
func ValidLeaseName(s string) bool {
	return len(s) >= 1 && len(s) <= 64 && plainName(s)
}
