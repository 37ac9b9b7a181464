package statetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func blobsOf(t *testing.T, e *env) taskstate.Blobs {
	t.Helper()
	return e.store.(taskstate.Blobs) // Features.Blobs
}

func readAll(t *testing.T, e *env, b taskstate.Blobs, key string) []byte {
	t.Helper()
	r, size, err := b.Blob(e.ctx, key)
	if err != nil {
		t.Fatalf("Blob(%s): %v", key, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading blob %s: %v", key, err)
	}
	if int64(len(got)) != size {
		t.Fatalf("blob %s: read %d bytes, Blob said %d", key, len(got), size)
	}
	return got
}

// Blobs of every size come back byte for byte, a second put replaces the
// first, and an unknown blob is ErrNotFound.
func (s *suite) blobRoundTrip(t *testing.T, e *env) {
	b := blobsOf(t, e)
	id := taskstate.NewID()
	big := make([]byte, 3<<20+12345) // several chunks and a partial one
	_, _ = rand.Read(big)
	for _, c := range []struct {
		name string
		data []byte
	}{{"empty", nil}, {"small", []byte(`{"content":[]}`)}, {"artifact/report v2.pdf", big}} {
		n, err := b.PutBlob(e.ctx, taskstate.BlobKey(id, c.name), bytes.NewReader(c.data), 0)
		if err != nil || n != int64(len(c.data)) {
			t.Fatalf("PutBlob(%s): %d, %v; want %d", c.name, n, err, len(c.data))
		}
		if got := readAll(t, e, b, taskstate.BlobKey(id, c.name)); !bytes.Equal(got, c.data) {
			t.Fatalf("blob %s: %d bytes back, differing from the %d written", c.name, len(got), len(c.data))
		}
	}
	if _, err := b.PutBlob(e.ctx, taskstate.BlobKey(id, "small"), bytes.NewReader([]byte("second")), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, e, b, taskstate.BlobKey(id, "small")); string(got) != "second" {
		t.Fatalf("replaced blob reads %q", got)
	}
	if _, _, err := b.Blob(e.ctx, taskstate.BlobKey(id, "nope")); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("unknown blob: %v, want ErrNotFound", err)
	}
	if _, err := b.PutBlob(e.ctx, "not a key", bytes.NewReader(nil), 0); err == nil {
		t.Fatal("PutBlob with a key that is not <task id>/<name> succeeded")
	}
}

// A blob with a TTL is gone after it; one without stays.
func (s *suite) blobExpiry(t *testing.T, e *env) {
	b := blobsOf(t, e)
	id := taskstate.NewID()
	if _, err := b.PutBlob(e.ctx, taskstate.BlobKey(id, "result"), bytes.NewReader([]byte("soon gone")), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutBlob(e.ctx, taskstate.BlobKey(id, "args"), bytes.NewReader([]byte("stays")), 0); err != nil {
		t.Fatal(err)
	}
	readAll(t, e, b, taskstate.BlobKey(id, "result"))
	eventually(t, s.opts.Wait, "the blob with a 1s TTL to expire", func() (bool, error) {
		_, _, err := b.Blob(e.ctx, taskstate.BlobKey(id, "result"))
		if errors.Is(err, taskstate.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if got := readAll(t, e, b, taskstate.BlobKey(id, "args")); string(got) != "stays" {
		t.Fatalf("blob without TTL: %q", got)
	}
}

// DeleteBlobs removes every blob of one task and no other task's.
func (s *suite) blobDelete(t *testing.T, e *env) {
	b := blobsOf(t, e)
	one, other := taskstate.NewID(), taskstate.NewID()
	for _, k := range []string{taskstate.BlobKey(one, "args"), taskstate.BlobKey(one, "artifact/a"), taskstate.BlobKey(other, "args")} {
		if _, err := b.PutBlob(e.ctx, k, bytes.NewReader([]byte(k)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeleteBlob(e.ctx, taskstate.BlobKey(one, "artifact/a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Blob(e.ctx, taskstate.BlobKey(one, "artifact/a")); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("a blob after DeleteBlob: %v", err)
	}
	if got := readAll(t, e, b, taskstate.BlobKey(one, "args")); string(got) != taskstate.BlobKey(one, "args") {
		t.Fatalf("the task's other blob after DeleteBlob: %q", got)
	}
	if err := b.DeleteBlob(e.ctx, taskstate.BlobKey(one, "never")); err != nil {
		t.Fatalf("DeleteBlob of a blob that is not there: %v", err)
	}
	if _, err := b.PutBlob(e.ctx, taskstate.BlobKey(one, "artifact/a"), bytes.NewReader([]byte("a")), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBlobs(e.ctx, one); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{taskstate.BlobKey(one, "args"), taskstate.BlobKey(one, "artifact/a")} {
		if _, _, err := b.Blob(e.ctx, k); !errors.Is(err, taskstate.ErrNotFound) {
			t.Fatalf("%s after DeleteBlobs: %v", k, err)
		}
	}
	if got := readAll(t, e, b, taskstate.BlobKey(other, "args")); string(got) != taskstate.BlobKey(other, "args") {
		t.Fatalf("another task's blob: %q", got)
	}
	if err := b.DeleteBlobs(e.ctx, taskstate.NewID()); err != nil {
		t.Fatalf("DeleteBlobs of a task without blobs: %v", err)
	}
}
