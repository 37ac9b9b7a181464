package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Results larger than taskstate.InlineMax live in a blob of their task
// (taskstate.BlobRef on the record). Every reply that carries a plain one (a
// compact object the reply can splice as it is) — tasks/get, an inline
// call's reply, 2025-11-25 tasks/result, a notifications/tasks event —
// copies it from the store to the client chunk by chunk inside the reply's
// JSON-RPC envelope, so an api serving many large results holds a chunk of
// each, not the whole. A result that is not plain (its own "_meta" or
// "resultType" must be merged with the reply's) is read whole; those reads
// share Config.ResultMemory, and one that cannot get its share within
// resultMemoryWait gets a retryable answer (errResultsBusy) instead of
// taking the api's memory.

// resultMemoryWait bounds how long a reply waits for its share of
// Config.ResultMemory before answering that the api is busy.
const resultMemoryWait = 10 * time.Second

// errResultsBusy: the results being read whole already hold
// Config.ResultMemory.
var errResultsBusy = errors.New("mcpfront: too many large results being read at once")

// resultBudget bounds the bytes of results read whole at once.
type resultBudget struct {
	sem   *semaphore.Weighted
	limit int64
}

func newResultBudget(limit int64) resultBudget {
	return resultBudget{sem: semaphore.NewWeighted(limit), limit: limit}
}

// resolved is t with its result read from its blob, when it has one, and
// the function that gives back the share of Config.ResultMemory the read
// took; call it once the reply is written. It fails with errResultsBusy
// when no share comes free in time.
func (s *Server) resolved(ctx context.Context, t *taskstate.Task) (*taskstate.Task, func(), error) {
	if t == nil || t.ResultRef == nil {
		return t, func() {}, nil
	}
	n := min(max(t.ResultRef.Size, 1), s.results.limit) // one larger than the whole budget reads alone
	wctx, cancel := context.WithTimeout(ctx, resultMemoryWait)
	err := s.results.sem.Acquire(wctx, n)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, errResultsBusy
	}
	r, err := taskstate.ResolveResult(ctx, s.store, t)
	if err != nil {
		s.results.sem.Release(n)
		return nil, nil, err
	}
	return r, func() { s.results.sem.Release(n) }, nil
}

// plainBlob is a plain result blob (taskstate.BlobRef.Plain) opened for
// splicing into a reply, its opening brace read.
type plainBlob struct {
	r    io.ReadCloser
	br   *bufio.Reader
	size int64
	task string
}

// openPlain opens the result of t when t completed with a plain blob; nil
// when it did not, or the blob cannot be read or does not start an object
// (the caller then answers from the record, and says what is missing).
func (s *Server) openPlain(ctx context.Context, t *taskstate.Task) *plainBlob {
	ref := t.ResultRef
	if t.Status != taskstate.Completed || ref == nil || !ref.Plain || ref.Size < 2 {
		return nil
	}
	blobs, ok := s.store.(taskstate.Blobs)
	if !ok {
		return nil
	}
	r, size, err := blobs.Blob(ctx, ref.Key)
	if err != nil {
		return nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if c, err := br.ReadByte(); err != nil || c != '{' || size < 2 {
		r.Close()
		return nil
	}
	return &plainBlob{r: r, br: br, size: size, task: t.ID}
}

func (p *plainBlob) Close() error { return p.r.Close() }

// splice writes head, the members of the blob's object and tail, with the
// commas they need between them: head ends inside an open object (with
// "{" or after a member), tail goes on from there (with a member or "}").
func (p *plainBlob) splice(w io.Writer, head, tail []byte) error {
	members := p.size > 2
	open := len(head) > 0 && head[len(head)-1] == '{'
	closing := len(tail) > 0 && tail[0] == '}'
	b := head
	if members && !open || !members && !open && !closing {
		b = append(b, ',')
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if members {
		if n, err := io.CopyN(w, p.br, p.size-2); err != nil {
			return fmt.Errorf("the blob of %d bytes broke off after %d: %w", p.size, n+1, err)
		}
		if c, err := p.br.ReadByte(); err != nil || c != '}' {
			return errors.New("the blob does not end its object")
		}
		if !closing {
			if _, err := w.Write([]byte{','}); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(tail)
	return err
}

// spliceFailed logs a reply cut short while a blob streamed into it: the
// status line is written, so the client sees a broken reply.
func (s *Server) spliceFailed(p *plainBlob, err error) {
	if err != nil {
		s.log.Error().Err(err).Str("task", p.task).Msg("streaming a result: the reply is cut short")
	}
}

// tasksGetStreamed answers tasks/get for a completed task whose result is
// a plain blob by copying the blob into the reply. It reports false
// (nothing written) when the task cannot be streamed.
func (s *Server) tasksGetStreamed(ctx context.Context, w http.ResponseWriter, c *call, t *taskstate.Task) bool {
	p := s.openPlain(ctx, t)
	if p == nil {
		return false
	}
	defer p.Close()
	// The task without its result, then the result spliced in: the same
	// bytes appendTask would write.
	head := s.appendTaskHead(nil, t, resultComplete)
	head = append(head, `,"result":{"resultType":"complete"`...)
	tail := append([]byte(`}`), s.appendTaskTail(nil)...)
	out := &replier{w: w, id: c.req.ID}
	s.spliceFailed(p, out.splice(p, head, tail))
	return true
}

// replySpliced answers with a completed task's plain result blob as the
// result, resultType rt first (none when "") and meta (an encoded object,
// or nil) as its _meta: what reshape writes for the result in memory. It
// reports false (nothing written) when the result is not a plain blob.
func (s *Server) replySpliced(ctx context.Context, out *replier, t *taskstate.Task, rt string, meta []byte) bool {
	p := s.openPlain(ctx, t)
	if p == nil {
		return false
	}
	defer p.Close()
	head := []byte{'{'}
	if rt != "" {
		head = appendString(append(head, `"resultType":`...), rt)
	}
	var tail []byte
	if len(meta) > 0 {
		tail = append(append([]byte(`"_meta":`), meta...), '}')
	} else {
		tail = []byte{'}'}
	}
	s.spliceFailed(p, out.splice(p, head, tail))
	return true
}

// notifyTask writes notifications/tasks for t on stream; the plain result
// blob of a completed task streams into the event.
func (s *Server) notifyTask(ctx context.Context, stream *sseWriter, t *taskstate.Task, sub json.RawMessage) {
	p := s.openPlain(ctx, t)
	if p == nil {
		stream.event(s.taskNotification(t, sub))
		return
	}
	defer p.Close()
	// What taskNotification writes: the DetailedTask without its
	// resultType, its _meta naming the subscription.
	head := []byte(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{`)
	head = s.appendTaskFields(head, t)
	head = append(head, `,"result":{"resultType":"complete"`...)
	tail := append([]byte(`},"_meta":{"`+metaSubscriptionID+`":`), sub...)
	tail = append(tail, "}}}"...)
	s.spliceFailed(p, stream.eventFrom(func(w io.Writer) error { return p.splice(w, head, tail) }))
}

// resultMissing answers for a task whose result blob is gone or unreadable,
// or cannot be read now (errResultsBusy: a retryable answer).
func resultMissing(err error) *rpcError {
	switch {
	case errors.Is(err, errResultsBusy):
		return errorf(vocab.CodeLimited, http.StatusOK, "too many large results are being read at once: ask again shortly").
			withData(map[string]any{"retryAfterMs": resultRetryMs})
	case errors.Is(err, taskstate.ErrNotFound):
		return errorf(vocab.CodeInternalError, http.StatusOK, "the task's result is no longer stored")
	}
	return errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: reading the task's result")
}

// resultRetryMs is the retry hint of errResultsBusy's answer.
const resultRetryMs = 1000
