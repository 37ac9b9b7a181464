package memstate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// List implements taskstate.Store: an owner's tasks ordered by creation
// time, then id. A cursor is base64url("<owner hash>:<created unix ns>:<task
// id>") of the last task a page returned, so it stays good when that task
// expires, and another owner's cursor is refused.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) ([]*taskstate.Task, string, error) {
	if owner == "" {
		return nil, "", nil
	}
	if limit <= 0 {
		limit = 50
	}
	hash := ownerHash(owner)
	var after listKey
	if cursor != "" {
		var ok bool
		if after, ok = decodeCursor(cursor, hash); !ok {
			return nil, "", taskstate.ErrBadCursor
		}
	}
	now := time.Now()
	s.mu.Lock()
	var keys []listKey
	for id, r := range s.tasks {
		if r.owner != owner {
			continue
		}
		if _, live := s.lookupLocked(id, now); live {
			k := listKey{r.created.UnixNano(), id}
			if cursor == "" || after.less(k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b listKey) int {
		if a.less(b) {
			return -1
		}
		return 1
	})
	more := len(keys) > limit
	if more {
		keys = keys[:limit]
	}
	page := make([]*taskstate.Task, len(keys))
	for i, k := range keys {
		page[i] = s.tasks[k.id].task()
	}
	s.mu.Unlock()
	if !more {
		return page, "", nil
	}
	last := keys[len(keys)-1]
	return page, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d:%s", hash, last.created, last.id)), nil
}

// listKey orders an owner's tasks.
type listKey struct {
	created int64
	id      string
}

func (a listKey) less(b listKey) bool {
	return a.created < b.created || a.created == b.created && a.id < b.id
}

func ownerHash(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

func decodeCursor(c, hash string) (listKey, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil {
		return listKey{}, false
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || parts[0] != hash || !taskstate.ValidID(parts[2]) {
		return listKey{}, false
	}
	created, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return listKey{}, false
	}
	return listKey{created, parts[2]}, true
}
