package console

import (
	"net/http"
	"time"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The schedules view (issue #32 item 5): GET api/schedules lists the
// recurring schedules the caller may see (its own tenant's owners; every
// one for a global operator) with each one's next firing.

// scheduleRow is one schedule as the page shows it.
type scheduleRow struct {
	Name  string `json:"name"`
	Tool  string `json:"tool"`
	Cron  string `json:"cron"`
	Owner string `json:"owner,omitempty"`
	// Next is the next firing (RFC 3339, UTC); empty when the expression
	// does not parse (Error says why).
	Next  string `json:"next,omitempty"`
	Error string `json:"error,omitempty"`
}

func (c *Console) schedules(w http.ResponseWriter, r *http.Request, who caller) {
	rows := []scheduleRow{}
	store, ok := c.cfg.Store.(taskstate.Schedules)
	if ok {
		all, err := store.ListSchedules(r.Context())
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "reading the schedules: "+err.Error())
			return
		}
		now := c.cfg.Now()
		for _, s := range all {
			if !who.seesOwner(s.Owner) {
				continue
			}
			row := scheduleRow{Name: s.Name, Tool: s.Tool, Cron: s.Cron, Owner: s.Owner}
			if cr, err := producer.ParseCron(s.Cron); err != nil {
				row.Error = err.Error()
			} else {
				row.Next = cr.Next(now).Format(time.RFC3339)
			}
			rows = append(rows, row)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": rows})
}
