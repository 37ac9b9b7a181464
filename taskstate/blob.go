package taskstate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Blobs keeps payloads too large for a record out of line: a task's
// arguments, its result and its artifacts, each under a key of the task
// (BlobKey). It is an optional ability of a Store, found by type assertion;
// a Store without it keeps every payload in the record.
type Blobs interface {
	// PutBlob stores what r yields under key, replacing any blob there,
	// and returns its size. ttl > 0 makes the blob expire that long after
	// this write; 0 keeps it until DeleteBlobs. Memory use is bounded by
	// the implementation's chunk size, not by the blob's.
	PutBlob(ctx context.Context, key string, r io.Reader, ttl time.Duration) (int64, error)
	// Blob opens a blob for reading (ErrNotFound when it is missing or
	// expired) and tells its size. Reads stream it chunk by chunk.
	Blob(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// DeleteBlob removes one blob (nil when it is not there).
	DeleteBlob(ctx context.Context, key string) error
	// DeleteBlobs removes every blob of the task (nil when there is none).
	DeleteBlobs(ctx context.Context, taskID string) error
}

// BlobKey names blob name of task taskID ("args", "result",
// "artifact/<name>").
func BlobKey(taskID, name string) string { return taskID + "/" + name }

// ParseBlobKey reads a BlobKey back; false unless key is a valid task id, a
// "/" and a name that is not empty. Stores use it to refuse a key no task
// could have before touching the backend.
func ParseBlobKey(key string) (taskID, name string, ok bool) {
	taskID, name, ok = strings.Cut(key, "/")
	if !ok || name == "" || !ValidID(taskID) {
		return "", "", false
	}
	return taskID, name, true
}

// BlobRef stands in a record for a payload kept in a blob.
type BlobRef struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// Plain: the payload is a compact JSON object with no "resultType"
	// and no "_meta" anywhere in it, so a front end may splice it into a
	// reply as it streams (see mcpfront); otherwise it reads it whole.
	Plain bool `json:"plain,omitempty"`
	// IsError: the payload is a tool result with isError set.
	IsError bool `json:"isError,omitempty"`
}

// Artifact is a named blob a handler attached to its task.
type Artifact struct {
	MimeType string `json:"mimeType,omitempty"`
	Size     int64  `json:"size"`
}

// InlineMax is the largest payload (arguments, result) a record or a job
// carries itself; a larger one goes to a blob when the Store keeps Blobs.
// NATS bounds a message at 1 MiB by default, and every write of a task's
// record carries its whole record.
const InlineMax = 256 << 10

// ReadBlob reads a whole blob into memory.
func ReadBlob(ctx context.Context, b Blobs, key string) ([]byte, error) {
	r, size, err := b.Blob(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := io.Copy(buf, r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DropArgs removes the blob of an ended task's arguments: nobody reads them
// any more (the run that used them had them in memory) and, unlike a
// result's, they carry no TTL. Whoever ends a task calls it; nil when there
// is nothing to remove.
func DropArgs(ctx context.Context, s Store, t *Task) error {
	blobs, ok := s.(Blobs)
	if !ok || t == nil || t.ArgumentsRef == nil || !t.Status.Terminal() {
		return nil
	}
	return blobs.DeleteBlob(ctx, t.ArgumentsRef.Key)
}

// ResolveResult returns t with its result read back from its blob when it
// has one (a copy; t itself is left alone), for the readers that hand a
// whole record out: an operator's view, a reply built in memory.
func ResolveResult(ctx context.Context, s Store, t *Task) (*Task, error) {
	if t == nil || t.ResultRef == nil {
		return t, nil
	}
	blobs, ok := s.(Blobs)
	if !ok {
		return nil, fmt.Errorf("taskstate: task %s has its result in blob %s, and %T keeps no blobs", t.ID, t.ResultRef.Key, s)
	}
	b, err := ReadBlob(ctx, blobs, t.ResultRef.Key)
	if err != nil {
		return nil, fmt.Errorf("taskstate: reading the result of %s: %w", t.ID, err)
	}
	c := t.Clone()
	c.Result, c.ResultRef = b, nil
	return c, nil
}

// ArtifactURI is the resource URI of a task's artifact, which the api
// serves through resources/read to the task's owner while the task is kept:
// mcpq://tasks/<task id>/artifacts/<name>.
func ArtifactURI(taskID, name string) string {
	return "mcpq://tasks/" + taskID + "/artifacts/" + name
}

// ParseArtifactURI reads an ArtifactURI back; false for any other URI.
func ParseArtifactURI(uri string) (taskID, name string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "mcpq://tasks/")
	if !ok {
		return "", "", false
	}
	taskID, name, ok = strings.Cut(rest, "/artifacts/")
	if !ok || !ValidID(taskID) || !ValidArtifactName(name) {
		return "", "", false
	}
	return taskID, name, true
}

// ValidArtifactName reports whether name may name an artifact: 1 to 128 of
// letters, digits, ".", "_" and "-", not starting with ".".
func ValidArtifactName(name string) bool {
	if name == "" || len(name) > 128 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
