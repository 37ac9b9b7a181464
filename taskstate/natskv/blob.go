package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Blobs live in a stream of their own, <TaskBucket>_blobs: a blob is its
// chunks (blobChunk bytes each, subjects <base>.<task>.<name>.c.<n>) and
// then a manifest (<base>.<task>.<name>.m) saying how many chunks and bytes
// it has; the stream keeps one message per subject, and each message
// carries the blob's TTL (JetStream per-message TTL).
const blobChunk = 256 << 10

var _ taskstate.Blobs = (*Store)(nil)

type blobManifest struct {
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
}

func (s *Store) blobStream() string { return s.cfg.TaskBucket + "_blobs" }
func (s *Store) blobBase() string   { return "mcpqblob." + s.cfg.TaskBucket }

// blobSubject is the subject of part ("m" or "c.<n>") of the blob key
// (<task id>/<name>).
func (s *Store) blobSubject(key, part string) (string, error) {
	task, name, ok := taskstate.ParseBlobKey(key)
	if !ok {
		return "", fmt.Errorf("natskv: blob key %q: want <task id>/<name>", key)
	}
	return s.blobBase() + "." + task + "." + toolKey(name) + "." + part, nil
}

// ensureBlobs creates (or binds) the blob stream.
func (s *Store) ensureBlobs(ctx context.Context, storage jetstream.StorageType) error {
	want := jetstream.StreamConfig{
		Name:              s.blobStream(),
		Description:       "mcpqueue task payloads too large for a record (arguments, results, artifacts)",
		Subjects:          []string{s.blobBase() + ".>"},
		Storage:           storage,
		Replicas:          s.cfg.Replicas,
		MaxMsgsPerSubject: 1,
		AllowMsgTTL:       true,
		Discard:           jetstream.DiscardOld,
	}
	return jsdurable.Retry(ctx, func(ctx context.Context) error {
		if err := jsdurable.CheckStorage(ctx, s.js, want.Name, storage); err != nil {
			return err
		}
		st, err := s.js.Stream(ctx, want.Name)
		if err == nil {
			if have := st.CachedInfo().Config; have.Replicas == want.Replicas && have.AllowMsgTTL && have.MaxMsgsPerSubject == 1 {
				s.blobs = st
				return nil
			}
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		st, err = s.js.CreateOrUpdateStream(ctx, want)
		if err != nil {
			return err
		}
		s.blobs = st
		return nil
	})
}

// PutBlob writes the chunks, then the manifest.
func (s *Store) PutBlob(ctx context.Context, key string, r io.Reader, ttl time.Duration) (int64, error) {
	mSubj, err := s.blobSubject(key, "m")
	if err != nil {
		return 0, err
	}
	var opts []jetstream.PublishOpt
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(max(ttl, time.Second)))
	}
	buf := make([]byte, blobChunk)
	var size int64
	chunks := 0
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			subj, _ := s.blobSubject(key, "c."+strconv.Itoa(chunks))
			if _, err := s.js.Publish(ctx, subj, buf[:n], opts...); err != nil {
				return 0, fmt.Errorf("natskv: put blob %s: chunk %d: %w", key, chunks, err)
			}
			chunks++
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("natskv: put blob %s: %w", key, rerr)
		}
	}
	m, _ := json.Marshal(blobManifest{Size: size, Chunks: chunks})
	if _, err := s.js.Publish(ctx, mSubj, m, opts...); err != nil {
		return 0, fmt.Errorf("natskv: put blob %s: manifest: %w", key, err)
	}
	return size, nil
}

// Blob reads the manifest and streams the chunks one by one.
func (s *Store) Blob(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	mSubj, err := s.blobSubject(key, "m")
	if err != nil {
		return nil, 0, err
	}
	raw, err := s.blobs.GetLastMsgForSubject(ctx, mSubj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, fmt.Errorf("natskv: blob %s: %w", key, taskstate.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("natskv: blob %s: %w", key, err)
	}
	var m blobManifest
	if err := json.Unmarshal(raw.Data, &m); err != nil {
		return nil, 0, fmt.Errorf("natskv: blob %s: bad manifest: %w", key, err)
	}
	return &blobReader{ctx: ctx, s: s, key: key, m: m}, m.Size, nil
}

type blobReader struct {
	ctx  context.Context
	s    *Store
	key  string
	m    blobManifest
	next int    // chunk to fetch
	cur  []byte // what is left of the current chunk
}

func (b *blobReader) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.next >= b.m.Chunks {
			return 0, io.EOF
		}
		subj, _ := b.s.blobSubject(b.key, "c."+strconv.Itoa(b.next))
		msg, err := b.s.blobs.GetLastMsgForSubject(b.ctx, subj)
		if err != nil {
			return 0, fmt.Errorf("natskv: blob %s: chunk %d: %w", b.key, b.next, err)
		}
		b.cur = msg.Data
		b.next++
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *blobReader) Close() error { return nil }

// DeleteBlob purges the blob's subjects.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	m, err := s.blobSubject(key, "m")
	if err != nil {
		return err
	}
	if err := s.blobs.Purge(ctx, jetstream.WithPurgeSubject(strings.TrimSuffix(m, ".m")+".>")); err != nil {
		return fmt.Errorf("natskv: delete blob %s: %w", key, err)
	}
	return nil
}

// DeleteBlobs purges the task's subjects.
func (s *Store) DeleteBlobs(ctx context.Context, taskID string) error {
	if !taskstate.ValidID(taskID) {
		return fmt.Errorf("natskv: delete blobs: invalid task id %q", taskID)
	}
	if err := s.blobs.Purge(ctx, jetstream.WithPurgeSubject(s.blobBase()+"."+taskID+".>")); err != nil {
		return fmt.Errorf("natskv: delete blobs of %s: %w", taskID, err)
	}
	return nil
}
