package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// subscriptions/listen (2026-07-28) with the tasks extension's
// notifications/tasks: the response is an SSE stream that opens with
// notifications/subscriptions/acknowledged and then carries, for every
// subscribed task, its DetailedTask (what tasks/get would answer) each time
// its status, status message or outstanding input requests change. Changes
// come from the store's change feed (taskstate.Store.Watch), so any replica
// serves any subscription, whichever replica or worker made the change.
//
// The stream ends
//   - when the client closes it (the request context ends): nothing more is written;
//   - when every subscribed task has ended (terminal records never change, so
//     nothing more can come) or the server shuts down (EndListens): with the
//     graceful subscriptions/listen result, then the stream closes.
//
// Only task notifications are offered; the acknowledgement omits any other
// notification type the client asked for.

const (
	metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

	defaultMaxListenTasks   = 64
	defaultMaxListenStreams = 16
	defaultListenKeepalive  = 15 * time.Second
)

// listenState is the replica's bookkeeping of open listen streams. Its zero
// value is ready to use.
type listenState struct {
	mu      sync.Mutex
	open    map[string]int // limitKey → open streams on this replica
	closing chan struct{}  // closed by EndListens
	ended   bool
}

// closingCh returns the channel EndListens closes.
func (l *listenState) closingCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing == nil {
		l.closing = make(chan struct{})
	}
	return l.closing
}

// acquire counts one more stream for key unless it already has max open.
func (l *listenState) acquire(key string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[string]int{}
	}
	if l.open[key] >= max {
		return false
	}
	l.open[key]++
	return true
}

func (l *listenState) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// EndListens ends every open subscriptions/listen stream of this server
// gracefully (each gets its subscriptions/listen result) and refuses new
// ones. Call it when the HTTP server starts shutting down
// (http.Server.RegisterOnShutdown): open streams would otherwise hold the
// shutdown until its deadline and then drop without the result.
func (s *Server) EndListens() {
	s.listens.closingCh() // make sure the channel exists
	s.listens.mu.Lock()
	defer s.listens.mu.Unlock()
	if !s.listens.ended {
		s.listens.ended = true
		close(s.listens.closing)
	}
}

func (s *Server) maxListenTasks() int {
	if s.cfg.MaxListenTasks > 0 {
		return s.cfg.MaxListenTasks
	}
	return defaultMaxListenTasks
}

func (s *Server) maxListenStreams() int {
	if s.cfg.MaxListenStreams > 0 {
		return s.cfg.MaxListenStreams
	}
	return defaultMaxListenStreams
}

func (s *Server) listenKeepalive() time.Duration {
	if s.cfg.ListenKeepalive > 0 {
		return s.cfg.ListenKeepalive
	}
	return defaultListenKeepalive
}

// listenTaskIDs decodes params.notifications and returns the task ids asked
// for (nil when the filter has no taskIds), without duplicates.
func (s *Server) listenTaskIDs(c *call) (ids []string, asked bool, rerr *rpcError) {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	_ = json.Unmarshal(c.req.Params, &p) // the envelope decoded, so params is an object
	if len(p.Notifications) == 0 || string(p.Notifications) == "null" {
		return nil, false, invalidParams("invalid params: missing notifications (the filter of notification types to receive)")
	}
	var filter map[string]json.RawMessage
	if json.Unmarshal(p.Notifications, &filter) != nil {
		return nil, false, invalidParams("invalid params: notifications must be an object")
	}
	raw, asked := filter["taskIds"]
	if !asked || string(raw) == "null" {
		return nil, false, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, true, invalidParams("invalid params: notifications.taskIds must be an array of task id strings")
	}
	for _, id := range list {
		if id == "" {
			return nil, true, invalidParams("invalid params: notifications.taskIds holds an empty task id")
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if n := s.maxListenTasks(); len(ids) > n {
		return nil, true, invalidParams(fmt.Sprintf("invalid params: notifications.taskIds has %d task ids; one subscription takes at most %d", len(ids), n))
	}
	return ids, true, nil
}

func (s *Server) subscriptionsListen(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	ids, asked, rerr := s.listenTaskIDs(c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if asked && !c.tasksExt {
		writeError(w, c.req.ID, errorf(vocab.CodeMissingCapability, http.StatusBadRequest, "task notifications need the "+tasksExtension+" extension declared in _meta."+metaClientCaps).
			withData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}))
		return
	}
	if !acceptsSSE(r) {
		writeError(w, c.req.ID, errorf(vocab.CodeInvalidRequest, http.StatusNotAcceptable, "subscriptions/listen answers with an event stream: Accept must include text/event-stream"))
		return
	}
	// Every task must be the caller's: another principal's task gets the
	// answer an unknown one gets, and nothing is subscribed.
	for _, id := range ids {
		if _, rerr := s.ownedTask(ctx, c.req.Method, id, c.owner); rerr != nil {
			writeError(w, c.req.ID, rerr)
			return
		}
	}
	select {
	case <-s.listens.closingCh():
		writeError(w, c.req.ID, errorf(vocab.CodeInternalError, http.StatusServiceUnavailable, "the server is shutting down; listen on another replica"))
		return
	default:
	}
	key, limit := limitKey(r), s.maxListenStreams()
	if !s.listens.acquire(key, limit) {
		writeError(w, c.req.ID, errorf(vocab.CodeLimited, http.StatusOK, fmt.Sprintf("too many open subscriptions/listen streams: at most %d per client on one server; close one first", limit)).
			withData(map[string]any{"maxListenStreams": limit}))
		return
	}
	defer s.listens.release(key)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch before acknowledging, so no change after the acknowledgement
	// is missed; each watch starts with the task's current record.
	updates, missing, err := s.watchAll(ctx, ids)
	if errors.Is(err, taskstate.ErrNotFound) { // it expired meanwhile
		writeError(w, c.req.ID, invalidParams("Task not found: "+clip(missing)))
		return
	}
	if err != nil {
		s.internalError(w, c.req.ID, "watching tasks", err)
		return
	}
	defer func() { // the watches end with ctx; return once they have
		cancel()
		for range updates {
		}
	}()

	sub := c.req.ID
	stream := &sseWriter{w: w}
	honored := map[string]any{}
	if asked {
		honored["taskIds"] = append([]string{}, ids...)
	}
	stream.event(notification("notifications/subscriptions/acknowledged", map[string]any{
		"_meta": map[string]any{metaSubscriptionID: sub}, "notifications": honored,
	}))

	keepalive := time.NewTicker(s.listenKeepalive())
	defer keepalive.Stop()
	closing := s.listens.closingCh()
	last := map[string]string{} // task id → what the client last saw of it
	for {
		select {
		case <-ctx.Done(): // the client went away
			return
		case <-closing:
			s.endListen(stream, sub)
			return
		case <-keepalive.C:
			stream.comment()
		case t, ok := <-updates:
			if !ok { // every subscribed task has ended
				s.endListen(stream, sub)
				return
			}
			s.durations.observe(t)
			if seen := visibleState(t); last[t.ID] != seen {
				last[t.ID] = seen
				s.notifyTask(ctx, stream, t, sub)
			}
		}
	}
}

// watchAll watches every task and merges their changes, in order per task,
// into one channel that closes once every task has turned terminal (or
// ctx ends). On failure it names the task it could not watch.
func (s *Server) watchAll(ctx context.Context, ids []string) (<-chan *taskstate.Task, string, error) {
	chans := make([]<-chan *taskstate.Task, 0, len(ids))
	for _, id := range ids {
		ch, err := s.store.Watch(ctx, id)
		if err != nil {
			return nil, id, err // the watches opened so far end with ctx
		}
		chans = append(chans, ch)
	}
	out := make(chan *taskstate.Task)
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				select {
				case out <- t:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out, "", nil
}

// visibleState is what a notification shows of a record besides its
// timestamps: records also change for lease renewals, which the client
// cannot see and is not told about.
func visibleState(t *taskstate.Task) string {
	b, _ := json.Marshal([]any{t.Status, t.StatusMessage, t.InputRequests})
	return string(b)
}

// taskNotification is notifications/tasks for t: the DetailedTask tasks/get
// would answer, tagged with the subscription.
func (s *Server) taskNotification(t *taskstate.Task, sub json.RawMessage) []byte {
	if r, release, err := s.resolved(context.Background(), t); err == nil {
		defer release()
		t = r
	} else {
		s.log.Error().Err(err).Msg("notifications/tasks: the task's result")
	}
	var params map[string]json.RawMessage
	_ = json.Unmarshal(s.detailedTask(t), &params)
	delete(params, "resultType") // a result's field; the notification carries the task
	params["_meta"], _ = json.Marshal(map[string]any{metaSubscriptionID: sub})
	return notification("notifications/tasks", params)
}

// endListen writes the graceful end of a subscription: the listen request's
// own result, carrying the subscription id.
func (s *Server) endListen(stream *sseWriter, sub json.RawMessage) {
	meta := s.resultMeta()
	meta[metaSubscriptionID] = sub
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: sub, Result: map[string]any{"resultType": resultComplete, "_meta": meta}})
	stream.final(b)
}

func notification(method string, params any) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	return b
}

// comment writes an SSE comment line: a keep-alive that clients ignore, so
// that idle streams are not closed by intermediaries or client timeouts.
func (s *sseWriter) comment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !s.started {
		return
	}
	_, _ = fmt.Fprint(s.w, ":\n\n")
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
