package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Idempotency keys. A client whose connection dropped before the answer to
// a tools/call came calls again; with the same idempotency key (the
// Idempotency-Key header, or _meta["io.mcpqueue/idempotency-key"]) it gets
// the task the first call created instead of a second run. The key is
// scoped by owner: the task id is taskstate.IdempotentID(owner, key, round),
// round being the requestState of an MRTR retry (each round is a call of
// its own). producer.CreateOrGet creates the record if absent — of two
// calls racing on two replicas the store lets one create it and publish
// the job — and otherwise returns it as it stands:
//
//   - a task-capable call gets the handle (createTaskResult), or the outcome
//     when the task already ended and the tool's calls would be answered
//     inline anyway (adaptive completion);
//   - an inline call waits for the task's outcome like the first call did,
//     and a keyed inline call whose client goes away leaves the task
//     running (abandon): its retry comes back for it.
//
// The same key with another tool or other arguments is -32602 naming the
// key, and nothing is written.

// idempotencyKey reads a tools/call's idempotency key from the header and
// the request's _meta (meta; nil when there is none): "" when neither
// carries one; -32602 naming the field when one is malformed or the two
// disagree.
func idempotencyKey(r *http.Request, meta map[string]json.RawMessage) (string, *rpcError) {
	hdr, inHeader := "", false
	if vs := r.Header.Values(vocab.HeaderIdempotencyKey); len(vs) > 0 {
		if len(vs) > 1 {
			return "", invalidParams("invalid " + vocab.HeaderIdempotencyKey + " header: sent more than once")
		}
		hdr, inHeader = vs[0], true
		if err := taskstate.CheckIdempotencyKey(hdr); err != nil {
			return "", invalidParams(fmt.Sprintf("invalid %s header: the key %v", vocab.HeaderIdempotencyKey, err))
		}
	}
	raw, inMeta := meta[vocab.MetaIdempotencyKey]
	if !inMeta {
		return hdr, nil
	}
	field := fmt.Sprintf("_meta[%q]", vocab.MetaIdempotencyKey)
	var key string
	if len(raw) == 0 || raw[0] != '"' || unmarshalString(raw, &key) != nil {
		return "", invalidParams("invalid " + field + ": must be a string")
	}
	if err := taskstate.CheckIdempotencyKey(key); err != nil {
		return "", invalidParams(fmt.Sprintf("invalid %s: the key %v", field, err))
	}
	if inHeader && hdr != key {
		return "", invalidParams(fmt.Sprintf("the %s header and %s name different idempotency keys", vocab.HeaderIdempotencyKey, field))
	}
	return key, nil
}

// keyCall makes req a keyed call (key "" leaves it as it is): its task id
// becomes the key's, known before the record is written, so the caller can
// follow it from before the create.
func keyCall(req *producer.Request, key, round string) {
	if key == "" {
		return
	}
	req.IdempotencyKey, req.Round = key, round
	req.ID = taskstate.IdempotentID(req.Owner, key, round)
}

// startError is the answer to a call whose task could not be created or
// found (what names the step, for the log): -32602 for a key used for
// another call, else an internal error.
func (s *Server) startError(what string, err error) *rpcError {
	if errors.Is(err, producer.ErrKeyReused) {
		return keyReused(err)
	}
	return s.internal(what, err)
}

// keyReused is the -32602 of an idempotency key sent with another call
// than the one that created its task.
func keyReused(err error) *rpcError {
	var e *producer.KeyReusedError
	if !errors.As(err, &e) {
		return invalidParams("idempotency key was used for another call: send a new key for a new call")
	}
	return invalidParams(e.Error() + ": send a new key for a new call").withData(map[string]any{"idempotencyKey": e.Key})
}

// startCall creates the record and job of an inline call (syncCall) whose
// versions the caller follows from before the create. When a keyed call
// finds its task created already, the record may be past any version
// Follow would still deliver: the returned channel watches it from its
// current version instead.
func (s *Server) startCall(ctx context.Context, req *producer.Request, versions <-chan *taskstate.Task) (<-chan *taskstate.Task, *rpcError) {
	_, created, err := s.prod.CreateOrGet(ctx, req)
	if errors.Is(err, producer.ErrKeyReused) {
		return nil, keyReused(err)
	}
	if err != nil {
		s.log.Error().Err(err).Str("tool", req.Tool).Msg("starting call")
		return nil, errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: the call could not be started")
	}
	if created {
		return versions, nil
	}
	w, err := s.store.Watch(ctx, req.ID)
	if err != nil {
		return nil, s.internal("watching the call's task", err)
	}
	return w, nil
}

// abandon is what becomes of an inline call's task when its client goes
// away or its wait times out: it is cancelled, as nobody will read it —
// unless the call carried an idempotency key, whose retry comes back for
// the task.
//
// It says what became of the task, for the error the waiting client gets.
func (s *Server) abandon(ctx context.Context, req *producer.Request) (fate string) {
	if req.IdempotencyKey != "" {
		s.log.Info().Str("task", req.ID).Str("tool", req.Tool).Msg("the client of a keyed inline call left; the task goes on for its retry")
		return "the task goes on: call again with the same idempotency key for its result"
	}
	_, _ = s.prod.Cancel(ctx, req.ID, "the waiting client went away or the wait timed out")
	return "the call was cancelled"
}

// replyExisting answers a task-capable 2026-07-28 call whose key found its
// task: with the task's outcome when it has ended and calls of tool are
// answered inline when they end in time (adaptive completion), else with
// its handle as it stands.
func (s *Server) replyExisting(ctx context.Context, w http.ResponseWriter, c *call, tool *taskstate.ToolInfo, t *taskstate.Task) {
	ended := t.Status == taskstate.Completed || t.Status == taskstate.Failed
	if ended && s.inlineWait(tool) > 0 && s.replyInline(ctx, w, c, t) {
		return
	}
	writeResult(w, c.req.ID, s.createTaskResult(t))
}
