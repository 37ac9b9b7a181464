package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// Case 7: the Redis primary is killed with kill -9 while tasks are created
// and run; the Sentinel promotes the replica, api and workers follow it
// through their Sentinel (redis+sentinel://) clients, and the killed
// server comes back as the new primary's replica. Nothing acknowledged is
// lost: the api acknowledges a task only once its writes are on the replica
// (--redis-wait-replicas 1), so the promoted replica holds every task a
// client has a handle of. Without a replica (between the promotion and the
// old primary's return) calls are refused, not acknowledged.
func TestFaultRedisFailover(t *testing.T) {
	t.Parallel()
	logDir := harness.LogDir(t)
	ha := harness.StartRedisHA(t, logDir)
	be := ha.Backend()
	be.Args = append(be.Args, "--redis-wait-replicas", "1", "--redis-wait-timeout", "500ms")
	s := newFaultSystem(t, be, "2s")
	s.logDir = logDir
	s.startAPI(t, "api")
	s.startWorkers(t, 2, "--concurrency", "4")
	c := harness.NewClient(s.mcpURL, true)
	n, ms := pick(150, 600), pick(300, 1000)
	f := feed(c, n, ms, pick(30*time.Millisecond, 20*time.Millisecond))

	f.awaitAcked(t, n/4)
	ackedAtKill, _ := f.counts()
	ha.Primary.Kill()
	killed := time.Now()

	// The Sentinel notices (down after 1 s) and promotes the replica.
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		port, err := ha.PrimaryPort(context.Background())
		return err == nil && port == ha.Replica.Port, fmt.Sprintf("the Sentinel names port %d (%v), want the replica's %d", port, err, ha.Replica.Port)
	})
	promoted := time.Since(killed)
	// The old primary comes back empty; the Sentinel makes it a replica of
	// the new primary, which then has a replica to WAIT for again.
	ha.Primary.Restart(t)
	newPrimary := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(ha.Replica.Port)})
	defer newPrimary.Close()
	harness.Eventually(t, time.Minute, func() (bool, string) {
		info, err := newPrimary.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online"),
			"the new primary has no online replica yet"
	})
	replicaBack := time.Since(killed)
	harness.Eventually(t, time.Minute, func() (bool, string) {
		a, _ := f.counts()
		return a > ackedAtKill, "no call acknowledged since the primary was killed"
	})
	firstAck := time.Since(killed)

	acked := f.wait(t, 10*time.Minute)
	_, refused := f.counts()
	if len(acked) <= ackedAtKill {
		t.Fatalf("no task acknowledged after the failover (%d before)", ackedAtKill)
	}
	recs, _ := s.settled(t, pick(2*time.Minute, 10*time.Minute), nil)
	mustHold(t, recs, acked)
	mustComplete(t, recs, acked)
	mustEndTerminal(t, recs)
	mustServe(t, c, recs, acked)
	t.Logf("primary killed after %d acknowledged calls; replica promoted %s later; old primary back as replica %s later; first call acknowledged again %s later; %d calls acknowledged, %d refused",
		ackedAtKill, promoted.Round(10*time.Millisecond), replicaBack.Round(10*time.Millisecond), firstAck.Round(10*time.Millisecond), len(acked), refused)
	s.tallyRecords(recs).report(t)
}
