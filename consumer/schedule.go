package consumer

import (
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Scheduled calls (issue #32 item 1): a job whose not-before time is still
// ahead is not run, whichever queue delivered it early (a JetStream
// republish, a clock ahead of Asynq's): it is deferred until its time,
// which is no attempt and no failed delivery (broker.Deferrer).

// scheduleSlack is how early a job may come and still run: room for the
// clocks of two hosts.
const scheduleSlack = 50 * time.Millisecond

// early defers r's job when its not-before is ahead; true: the delivery
// ended here.
func (w *Worker) early(r *delivery) bool {
	at := r.job.NotBefore
	if at.IsZero() {
		at = taskstate.NotBefore(r.job.Meta)
	}
	wait := at.Sub(w.cfg.Now())
	if at.IsZero() || wait <= scheduleSlack {
		return false
	}
	r.log.Debug().Time("not_before", at).Dur("defer", wait).Msg("scheduled job came before its time; deferring it")
	deferJob(r.io, r.d, wait)
	return true
}
