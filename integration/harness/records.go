package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// arg is the value of flag in the backend's arguments ("" if absent).
func (be Backend) arg(flag string) string {
	for i, a := range be.Args {
		if a == flag && i+1 < len(be.Args) {
			return be.Args[i+1]
		}
	}
	return ""
}

// Records reads every task record of the system named prefix straight from
// its store, not through an api: also the records of calls whose client
// never got an answer. It retries for a while if the store is unreachable
// (a broker restarting, a cluster electing a leader).
func Records(t testing.TB, be Backend, prefix string) map[string]*taskstate.Task {
	t.Helper()
	var recs map[string]*taskstate.Task
	var err error
	Eventually(t, time.Minute, func() (bool, string) {
		recs, err = ReadRecords(be, prefix)
		if err != nil {
			return false, "reading task records: " + err.Error()
		}
		return true, ""
	})
	return recs
}

// ReadRecords is one attempt at Records, for goroutines other than the test's.
func ReadRecords(be Backend, prefix string) (map[string]*taskstate.Task, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if be.Name == "nats" {
		return natsRecords(ctx, be.arg("--nats"), prefix+"_tasks")
	}
	rdb := be.Redis
	if rdb == nil {
		opt, err := redis.ParseURL(be.arg("--redis"))
		if err != nil {
			return nil, err
		}
		rdb = func() *redis.Client { return redis.NewClient(opt) }
	}
	return redisRecords(ctx, rdb(), prefix+":task:")
}

// JetStream connects to url as a client named name; the caller closes nc.
func JetStream(url, name string) (nc *nats.Conn, js jetstream.JetStream, err error) {
	nc, err = nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, nil, err
	}
	js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func natsRecords(ctx context.Context, url, bucket string) (map[string]*taskstate.Task, error) {
	nc, js, err := JetStream(url, "fault-suite-reader")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	// A watch delivers each key's last value from the stream's leader; a
	// Get per listed key may be answered by a follower that has not yet
	// applied the newest writes (direct gets on a replicated bucket) and
	// miss a record that exists.
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	out := map[string]*taskstate.Task{}
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e == nil {
			return out, nil // the current values are all delivered
		}
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		t, err := taskstate.Decode(e.Value(), e.Revision())
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", e.Key(), err)
		}
		out[e.Key()] = t
	}
}

func redisRecords(ctx context.Context, rdb *redis.Client, keyPrefix string) (map[string]*taskstate.Task, error) {
	defer rdb.Close()
	out := map[string]*taskstate.Task{}
	iter := rdb.Scan(ctx, 0, keyPrefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		v, err := rdb.HGet(ctx, key, "v").Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		t, err := taskstate.Decode([]byte(v), 0)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", key, err)
		}
		out[strings.TrimPrefix(key, keyPrefix)] = t
	}
	return out, iter.Err()
}
