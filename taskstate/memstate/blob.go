package memstate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// checkKey refuses a key that is not taskstate.BlobKey of a task id.
func checkKey(key string) error {
	if _, _, ok := taskstate.ParseBlobKey(key); !ok {
		return fmt.Errorf("memstate: blob key %.200q is not <task id>/<name>", key)
	}
	return nil
}

// PutBlob implements taskstate.Blobs. The blob is held whole in memory.
func (s *Store) PutBlob(ctx context.Context, key string, r io.Reader, ttl time.Duration) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, fmt.Errorf("memstate: put blob %s: %w", key, err)
	}
	s.putEntry(s.blobs, key, b, ttl)
	return int64(len(b)), nil
}

// Blob implements taskstate.Blobs.
func (s *Store) Blob(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	b, ok := s.entry(s.blobs, key)
	if !ok {
		return nil, 0, fmt.Errorf("%w: blob %.200q", taskstate.ErrNotFound, key)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil // a put replaces b, never changes it
}

// DeleteBlob implements taskstate.Blobs.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blobs, key)
	return nil
}

// DeleteBlobs implements taskstate.Blobs.
func (s *Store) DeleteBlobs(ctx context.Context, taskID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs.deletePrefix(taskID + "/")
	return nil
}
