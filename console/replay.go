package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Dead letters and replay (issue #32): the list shows which tasks are dead
// letters (failed after their last attempt; GET api/tasks?dead=true lists
// only those), and POST api/tasks/{id}/replay runs an ended task's call
// again as a new task of its owner (producer.Replay, linked both ways).
// Only an admin who sees the task may replay it: a tenant's admin gets 404
// for another tenant's task, as for its cancel.

func (c *Console) replay(w http.ResponseWriter, r *http.Request, who caller) {
	t, err := c.cfg.Store.Get(r.Context(), r.PathValue("id"))
	if err == nil && !who.sees(t) {
		err = taskstate.ErrNotFound
	}
	var replay *taskstate.Task
	created := false
	if err == nil {
		replay, created, err = c.cfg.Producer.Replay(r.Context(), t.ID)
	}
	switch {
	case errors.Is(err, taskstate.ErrNotFound):
		writeErr(w, http.StatusNotFound, "no task "+strconv.Quote(r.PathValue("id")))
	case errors.Is(err, producer.ErrNotReplayable):
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the task has not ended: " + string(t.Status) + "; cancel it first", "task": rowOf(t)})
	case err != nil && replay == nil:
		writeErr(w, http.StatusInternalServerError, "replaying: "+err.Error())
	default: // a replay exists (err: the old record could not name it)
		ans := map[string]any{"task": rowOf(replay), "created": created}
		if err != nil {
			ans["warning"] = err.Error()
		}
		writeJSON(w, http.StatusOK, ans)
	}
}
