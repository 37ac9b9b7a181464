// Package redistest connects tests to a real Redis server.
//
// Tests use the server at $MCPQ_TEST_REDIS (default 127.0.0.1:6379) and keep
// apart by naming every key, channel and queue with Name, which never repeats;
// nothing ever needs FLUSHALL. A test that needs to restart Redis or kill its
// connections starts its own redis-server instead.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the server tests use.
func Addr() string {
	if a := os.Getenv("MCPQ_TEST_REDIS"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// Client returns a client of the test server, closed in t.Cleanup. It fails
// the test if the server does not answer.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c, _ := NamedClient(t)
	return c
}

// NamedClient is Client, also returning the fresh name its connections give
// the server (CLIENT SETNAME), by which KillSubscribers finds them.
func NamedClient(t testing.TB) (*redis.Client, string) {
	t.Helper()
	name := Name(t)
	c := redis.NewClient(&redis.Options{Addr: Addr(), ClientName: name})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("redistest: no Redis at %s (set MCPQ_TEST_REDIS): %v", Addr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, name
}

// Name returns a fresh name for t's keys, channels and queues: letters,
// digits and "_" only, so it is safe in any of them and in glob patterns.
func Name(t testing.TB) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return "t_" + base + "_" + rand.Text()[:10]
}

// DeleteKeys removes every key that starts with prefix (which must hold no
// glob characters) when the test ends.
func DeleteKeys(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = c.Del(ctx, keys...).Err()
		}
	})
}

// KillSubscribers kills the connections in pub/sub mode whose client name is
// name (see redis.Options.ClientName), as a network failure would, and
// returns how many there were. Only a test's own connections carry its name,
// so no other test is disturbed.
func KillSubscribers(t testing.TB, admin redis.UniversalClient, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("redistest: CLIENT LIST: %v", err)
	}
	killed := 0
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		f := map[string]string{}
		for _, kv := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["name"] == name && f["sub"] != "0" {
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", f["id"]).Err(); err != nil {
				t.Fatalf("redistest: CLIENT KILL: %v", err)
			}
			killed++
		}
	}
	return killed
}
