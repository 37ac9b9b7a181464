package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Results larger than taskstate.InlineMax live in a blob of their task
// (taskstate.BlobRef on the record). tasks/get streams a plain one (a compact
// object the reply can splice as it is) from the store to the client, so an
// api serving many large results holds a chunk of each, not the whole; the
// other paths (an inline call's reply, 2025-11-25 tasks/result, a
// notifications/tasks event) read the result into memory first.

// resolved is t with its result read from its blob, when it has one.
func (s *Server) resolved(ctx context.Context, t *taskstate.Task) (*taskstate.Task, error) {
	return taskstate.ResolveResult(ctx, s.store, t)
}

// streamResult answers tasks/get for a completed task whose result is a plain
// blob by copying the blob into the reply. It reports false (nothing
// written) when the task cannot be streamed.
func (s *Server) streamResult(ctx context.Context, w http.ResponseWriter, id json.RawMessage, t *taskstate.Task) bool {
	ref := t.ResultRef
	if t.Status != taskstate.Completed || ref == nil || !ref.Plain || ref.Size < 2 {
		return false
	}
	blobs, ok := s.store.(taskstate.Blobs)
	if !ok {
		return false
	}
	r, size, err := blobs.Blob(ctx, ref.Key)
	if err != nil {
		return false // the caller answers from the record (and says what is missing)
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	if c, err := br.ReadByte(); err != nil || c != '{' {
		return false
	}
	// The task without its result, then the result spliced in: the same
	// bytes appendTask would write, up to where the result goes.
	head := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	head = append(head, `,"result":`...)
	head = s.appendTaskHead(head, t, resultComplete)
	head = append(head, `,"result":{"resultType":"complete"`...)
	if size > 2 {
		head = append(head, ',')
	}
	tail := append([]byte(`}`), s.appendTaskTail(nil)...)
	tail = append(tail, '}')
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil {
		return true
	}
	if n, err := io.CopyN(w, br, size-2); err != nil {
		s.log.Error().Err(err).Str("task", t.ID).Int64("copied", n).Int64("size", size).Msg("streaming a result: the reply is cut short")
		return true
	}
	if c, err := br.ReadByte(); err != nil || c != '}' {
		s.log.Error().Str("task", t.ID).Msg("streaming a result: the blob does not end its object")
		return true
	}
	_, _ = w.Write(tail)
	return true
}

// resultMissing answers for a task whose result blob is gone or unreadable.
func resultMissing(err error) *rpcError {
	if errors.Is(err, taskstate.ErrNotFound) {
		return errorf(vocab.CodeInternalError, http.StatusOK, "the task's result is no longer stored")
	}
	return errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: reading the task's result")
}
