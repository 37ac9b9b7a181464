package redisbackend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

func connectRedis(t *testing.T, url string, require bool) error {
	t.Helper()
	o := &Options{URL: url, Prefix: redistest.Name(t), RequireDurable: require}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := Connect(ctx, t.Name(), o)
	if err == nil {
		_ = b.Close()
	}
	return err
}

// The shared test Redis runs without an append-only file: it is accepted
// with a warning, and refused under --require-durable.
func TestRequireDurableRedisWithoutAOF(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	if aof, err := c.ConfigGet(t.Context(), "appendonly").Result(); err != nil || aof["appendonly"] != "no" {
		t.Skipf("the test Redis has appendonly %v (%v); this test needs it off", aof, err)
	}
	url := "redis://" + c.Options().Addr
	if err := connectRedis(t, url, false); err != nil {
		t.Fatalf("without --require-durable: %v", err)
	}
	err := connectRedis(t, url, true)
	if err == nil || !strings.Contains(err.Error(), "--require-durable: Redis has appendonly no") || !strings.Contains(err.Error(), "set appendonly yes") {
		t.Fatalf("with --require-durable: %v", err)
	}
}

// A Redis of our own with an append-only file passes --require-durable;
// the same with an evicting policy does not.
func TestRequireDurableRedisWithAOF(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec").URL()
	if err := connectRedis(t, url, true); err != nil {
		t.Fatalf("appendonly yes, noeviction: %v", err)
	}
	url = redistest.Start(t, "--appendonly", "yes", "--maxmemory-policy", "allkeys-lru").URL()
	if err := connectRedis(t, url, true); err == nil || !strings.Contains(err.Error(), "maxmemory-policy allkeys-lru") {
		t.Fatalf("appendonly yes, allkeys-lru: %v", err)
	}
}
