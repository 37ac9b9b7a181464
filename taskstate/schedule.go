package taskstate

import (
	"encoding/json"
	"strings"
	"time"
)

// Scheduled calls (issue #32 item 1). A task created with a not-before time
// keeps it in its Meta under MetaNotBefore (an RFC 3339 string, the same
// key as vocab.MetaNotBefore), so the job the record makes carries it too;
// its handler must not start before then.

// MetaNotBefore is the Meta key of a scheduled task's not-before time.
const MetaNotBefore = "io.mcpqueue/not-before"

// NotBefore is the not-before time meta holds (a Task's or a job's Meta),
// or the zero time when it holds none (or one that does not parse).
func NotBefore(meta map[string]json.RawMessage) time.Time {
	raw, ok := meta[MetaNotBefore]
	if !ok {
		return time.Time{}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return at
}

// SetNotBefore returns meta (a new map when it is nil) with the
// not-before time at.
func SetNotBefore(meta map[string]json.RawMessage, at time.Time) map[string]json.RawMessage {
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[MetaNotBefore], _ = json.Marshal(at.UTC().Format(time.RFC3339Nano))
	return meta
}

// scheduledPrefix starts the statusMessage of a task waiting for its
// not-before time.
const scheduledPrefix = "scheduled for "

// ScheduledFor is the statusMessage of a task waiting for its not-before
// time at; the worker that takes the task clears it.
func ScheduledFor(at time.Time) string {
	return scheduledPrefix + at.UTC().Format(time.RFC3339)
}

// IsScheduledFor reports whether msg is a ScheduledFor statusMessage.
func IsScheduledFor(msg string) bool { return strings.HasPrefix(msg, scheduledPrefix) }
