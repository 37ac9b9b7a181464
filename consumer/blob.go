package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// DefaultMaxResult is Config.MaxResult's default.
const DefaultMaxResult = 64 << 20

// blobSlack keeps a result's blob a little past its record: the record
// goes first, so whoever reads the record finds its blob.
const blobSlack = time.Minute

// readArgs reads the arguments a job names by blob.
func (w *Worker) readArgs(ctx context.Context, key string) (json.RawMessage, error) {
	blobs, ok := w.store.(taskstate.Blobs)
	if !ok {
		return nil, fmt.Errorf("consumer: the job's arguments are in blob %s, and %T keeps no blobs", key, w.store)
	}
	return taskstate.ReadBlob(ctx, blobs, key)
}

// putResult keeps a result larger than taskstate.InlineMax in a blob of the
// task, expiring with the record (its TTL from the terminal write), and
// returns the reference the record carries; nil when the result stays in the
// record.
func (w *Worker) putResult(ctx context.Context, cs *callState, result json.RawMessage) (*taskstate.BlobRef, error) {
	blobs, ok := w.store.(taskstate.Blobs)
	if !ok || len(result) <= taskstate.InlineMax {
		return nil, nil
	}
	var ttl time.Duration
	cs.mu.Lock()
	if cs.rec != nil && cs.rec.TTLMs > 0 {
		ttl = cs.rec.TTL() + blobSlack
	}
	cs.mu.Unlock()
	key := taskstate.BlobKey(cs.taskID, "result")
	n, err := blobs.PutBlob(ctx, key, bytes.NewReader(result), ttl)
	if err != nil {
		return nil, fmt.Errorf("consumer: storing the result: %w", err)
	}
	ref := &taskstate.BlobRef{Key: key, Size: n, Plain: plainObject(result)}
	var head struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(result, &head) == nil {
		ref.IsError = head.IsError
	}
	return ref, nil
}

// plainObject reports whether b is a compact JSON object a front end may
// splice into a reply as it is (taskstate.BlobRef.Plain).
func plainObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' &&
		!bytes.Contains(b, []byte(`"resultType"`)) && !bytes.Contains(b, []byte(`"_meta"`))
}
