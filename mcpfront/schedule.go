package mcpfront

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/vocab"
)

// Scheduled calls (issue #32 item 1). A tools/call whose _meta carries
// "io.mcpqueue/not-before" (an RFC 3339 time) becomes a task at once —
// working, statusMessage "scheduled for <time>" — whose handler does not
// start before that time (producer.Request.NotBefore). A time that has
// passed runs at once, as an ordinary call (inline ones too). Refused with -32602, before anything is written: a
// value that is not an RFC 3339 string, a time more than
// Config.MaxScheduleAhead ahead, and a call that would be answered inline
// (a client without the tasks extension, a 2025-11-25 call without
// params.task, a tool whose task support is forbidden, an InputFirst tool):
// such a client would hold its request open until the time comes.

// DefaultMaxScheduleAhead is Config.MaxScheduleAhead's default: 30 days.
const DefaultMaxScheduleAhead = 720 * time.Hour

// notBeforeField names the _meta entry in error messages.
var notBeforeField = fmt.Sprintf("_meta[%q]", vocab.MetaNotBefore)

// notBefore reads a tools/call's not-before time from its _meta (meta;
// nil when there is none): the zero time when it carries none. asTask
// says the call gets a task handle; when it does not, needs says what the
// client must do for one.
func (s *Server) notBefore(meta map[string]json.RawMessage, asTask bool, needs string) (time.Time, *rpcError) {
	raw, ok := meta[vocab.MetaNotBefore]
	if !ok {
		return time.Time{}, nil
	}
	var v string
	if len(raw) == 0 || raw[0] != '"' || unmarshalString(raw, &v) != nil {
		return time.Time{}, invalidParams(fmt.Sprintf("invalid %s: must be a string holding an RFC 3339 time (e.g. 2026-12-07T16:00:00Z)", notBeforeField))
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidParams(fmt.Sprintf("invalid %s: %q is not an RFC 3339 time (e.g. 2026-12-07T16:00:00Z)", notBeforeField, clip(v)))
	}
	if limit := s.cfg.MaxScheduleAhead; at.Sub(s.cfg.Now()) > limit {
		return time.Time{}, invalidParams(fmt.Sprintf("invalid %s: %s is more than %s ahead, the most this server schedules (--max-schedule-ahead)", notBeforeField, v, limit))
	}
	if !at.After(s.cfg.Now()) {
		return time.Time{}, nil // its time has come: an ordinary call
	}
	if !asTask {
		return time.Time{}, invalidParams(fmt.Sprintf("%s schedules the call as a task, and this call would be answered inline: %s", notBeforeField, needs))
	}
	return at, nil
}
