package redisstate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// A blob is one string key, <prefix>blob:<task id>:<name>, written in
// chunks of blobChunk bytes to a temporary key that is renamed into place
// (readers never see half a blob) and read back with GETRANGE a chunk at a
// time. <prefix>blobs:<task id> lists a task's blob keys for DeleteBlobs.
const blobChunk = 256 << 10

var _ taskstate.Blobs = (*Store)(nil)

func (s *Store) blobKey(key string) (string, string, error) {
	task, name, ok := taskstate.ParseBlobKey(key)
	if !ok {
		return "", "", fmt.Errorf("redisstate: blob key %q: want <task id>/<name>", key)
	}
	return s.cfg.Prefix + "blob:" + task + ":" + name, s.cfg.Prefix + "blobs:" + task, nil
}

// PutBlob appends the chunks to a temporary key, then renames it into place
// with its expiry, and notes it in the task's blob list.
func (s *Store) PutBlob(ctx context.Context, key string, r io.Reader, ttl time.Duration) (int64, error) {
	k, list, err := s.blobKey(key)
	if err != nil {
		return 0, err
	}
	tmp := k + ":tmp:" + rand.Text()[:8]
	buf := make([]byte, blobChunk)
	var size int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := s.rdb.Append(ctx, tmp, string(buf[:n])).Err(); err != nil {
				_ = s.rdb.Del(context.WithoutCancel(ctx), tmp).Err()
				return 0, fmt.Errorf("redisstate: put blob %s: %w", key, err)
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			_ = s.rdb.Del(context.WithoutCancel(ctx), tmp).Err()
			return 0, fmt.Errorf("redisstate: put blob %s: %w", key, rerr)
		}
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if size == 0 {
			p.Set(ctx, k, "", ttl)
		} else {
			p.Rename(ctx, tmp, k)
			if ttl > 0 {
				p.PExpire(ctx, k, ttl)
			}
		}
		p.SAdd(ctx, list, k)
		if ttl > 0 {
			// The list lives as long as its longest-lived blob.
			p.PExpire(ctx, list, ttl+time.Minute)
		} else {
			p.Persist(ctx, list)
		}
		return nil
	})
	if err != nil {
		_ = s.rdb.Del(context.WithoutCancel(ctx), tmp).Err()
		return 0, fmt.Errorf("redisstate: put blob %s: %w", key, err)
	}
	return size, nil
}

// Blob opens a stored blob and says its size (ErrNotFound if absent or expired): taskstate.Blobs.
func (s *Store) Blob(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	k, _, err := s.blobKey(key)
	if err != nil {
		return nil, 0, err
	}
	n, err := s.rdb.Exists(ctx, k).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("redisstate: blob %s: %w", key, err)
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("redisstate: blob %s: %w", key, taskstate.ErrNotFound)
	}
	size, err := s.rdb.StrLen(ctx, k).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("redisstate: blob %s: %w", key, err)
	}
	return &blobReader{ctx: ctx, rdb: s.rdb, key: k, size: size}, size, nil
}

type blobReader struct {
	ctx       context.Context
	rdb       redis.UniversalClient
	key       string
	size, off int64
	cur       []byte
}

func (b *blobReader) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.off >= b.size {
			return 0, io.EOF
		}
		end := min(b.off+blobChunk, b.size) - 1
		v, err := b.rdb.GetRange(b.ctx, b.key, b.off, end).Result()
		if err != nil {
			return 0, fmt.Errorf("redisstate: blob read: %w", err)
		}
		if v == "" {
			return 0, fmt.Errorf("redisstate: blob %s ended at %d of %d bytes (expired or replaced while read)", b.key, b.off, b.size)
		}
		b.cur = []byte(v)
		b.off += int64(len(v))
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *blobReader) Close() error { return nil }

// DeleteBlob removes one blob and its entry in the task's list.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	k, list, err := s.blobKey(key)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, k)
		p.SRem(ctx, list, k)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstate: delete blob %s: %w", key, err)
	}
	return nil
}

// DeleteBlobs removes the blobs the task's list names, and the list.
func (s *Store) DeleteBlobs(ctx context.Context, taskID string) error {
	if !taskstate.ValidID(taskID) {
		return fmt.Errorf("redisstate: delete blobs: invalid task id %q", taskID)
	}
	list := s.cfg.Prefix + "blobs:" + taskID
	keys, err := s.rdb.SMembers(ctx, list).Result()
	if err != nil {
		return fmt.Errorf("redisstate: delete blobs of %s: %w", taskID, err)
	}
	if err := s.rdb.Del(ctx, append(keys, list)...).Err(); err != nil {
		return fmt.Errorf("redisstate: delete blobs of %s: %w", taskID, err)
	}
	return nil
}
