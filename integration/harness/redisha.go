package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisHA is Redis as a failover deployment runs it: a primary, a replica
// of it and a Sentinel watching both (quorum 1, down after 3 s), three
// redis-server processes, none of them persisting anything (--save "",
// --appendonly no): what survives the primary is what the replica has.
// With down after 1 s, a Sentinel on a loaded 2-core machine took the new
// primary for down within a second of the switch and failed over again, to
// the empty old primary just restarted as its replica.
type RedisHA struct {
	Master                     string // the Sentinel master name
	Primary, Replica, Sentinel *RedisServer
}

// StartRedisHA starts the three and waits until the Sentinel knows the
// replica.
func StartRedisHA(t testing.TB, logDir string) *RedisHA {
	t.Helper()
	noDisk := []string{"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"}
	h := &RedisHA{Master: "mcpq"}
	h.Primary = StartRedisArgs(t, logDir, "redis-primary", noDisk...)
	h.Replica = StartRedisArgs(t, logDir, "redis-replica", append(noDisk, "--replicaof", "127.0.0.1", strconv.Itoa(h.Primary.Port))...)

	conf := filepath.Join(t.TempDir(), "sentinel.conf") // the Sentinel rewrites it
	if err := os.WriteFile(conf, fmt.Appendf(nil, "sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %[1]s 3000\nsentinel failover-timeout %[1]s 10000\nsentinel parallel-syncs %[1]s 1\n",
		h.Master, h.Primary.Port), 0o600); err != nil {
		t.Fatal(err)
	}
	h.Sentinel = &RedisServer{Name: "redis-sentinel", Port: FreePort(t), Dir: t.TempDir(), bin: RedisServerBin(t), logDir: logDir,
		pre: []string{conf}, args: []string{"--sentinel"}, ready: "+monitor master", t: t}
	h.Sentinel.launch(t)
	Eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(h.Sentinel.Proc.Output(), "+slave slave 127.0.0.1:"+strconv.Itoa(h.Replica.Port)), "the Sentinel has not found the replica"
	})
	return h
}

// URL is the redis+sentinel:// URL of the primary, database 0.
func (h *RedisHA) URL() string {
	return fmt.Sprintf("redis+sentinel://127.0.0.1:%d/%s/0", h.Sentinel.Port, h.Master)
}

// Backend is the asynq backend on the primary the Sentinel names.
func (h *RedisHA) Backend() Backend {
	return Backend{Name: "asynq", Args: []string{"--broker", "asynq", "--redis", h.URL()},
		Redis: func() *redis.Client {
			return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: h.Master, SentinelAddrs: []string{fmt.Sprintf("127.0.0.1:%d", h.Sentinel.Port)}})
		}}
}

// PrimaryPort asks the Sentinel which port the primary is on now.
func (h *RedisHA) PrimaryPort(ctx context.Context) (int, error) {
	s := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", h.Sentinel.Port)})
	defer s.Close()
	addr, err := s.GetMasterAddrByName(ctx, h.Master).Result()
	if err != nil {
		return 0, err
	}
	if len(addr) != 2 {
		return 0, fmt.Errorf("sentinel answered %v", addr)
	}
	return strconv.Atoi(addr[1])
}
