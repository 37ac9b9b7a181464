package integration

// The fault suite of issue 6, "faults survived, nothing lost". Every case
// breaks real processes (kill -9, SIGSTOP, broker restarts, a cluster node
// lost, an api dying between record and publish, cancels) and then counts
// what the store holds:
//
//	created=N completed=N failed=N cancelled=N lost=0 duplicated_terminal_writes=0
//
// By default the cases run a bounded form for CI; MCPQ_FAULTS=full runs the
// issue's sizes (see docs/faults.md).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Case 1: workers die by kill -9 every few seconds while tasks run; every
// task still ends completed, none twice.
func TestFaultWorkerKills(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		n, ms := pick(60, 500), pick(300, 1000)
		every := pick(time.Second, 3*time.Second)
		s := newFaultSystem(t, faultBackend(t, broker), "2s")
		s.startAPI(t, "api")
		conc := pick("2", "4")
		s.startWorkers(t, pick(3, 4), "--concurrency", conc)
		c := harness.NewClient(s.mcpURL, true)
		ids := startTasks(t, c, n, ms)

		// The schedule: a random worker dies every `every` (±50%, counted
		// from the previous kill) and a fresh one takes its place, until
		// every task has ended.
		done := allEnded(t, s)
		deadline := time.After(pick(3*time.Minute, 15*time.Minute))
		kills, next, began := 0, time.Now(), time.Now()
	schedule:
		for {
			next = next.Add(every/2 + rand.N(every))
			select {
			case <-done:
				break schedule
			case <-deadline:
				break schedule
			case <-time.After(time.Until(next)): // the fault schedule
			}
			s.killRandomWorker()
			kills++
			s.startWorker(t, "--concurrency", conc)
		}
		recs, _ := s.settled(t, time.Minute, nil)
		ran := time.Since(began)
		t.Logf("%d workers killed with kill -9 in %s (one every %s)", kills, ran.Round(time.Second), (ran / time.Duration(max(kills, 1))).Round(100*time.Millisecond))
		mustHold(t, recs, ids)
		mustAllComplete(t, recs)
		mustServe(t, c, recs, ids)
		s.tallyRecords(recs).report(t)
	})
}

// allEnded is closed once every task record of s is terminal (polled
// twice a second: there is no event for "all of them").
func allEnded(t *testing.T, s *faultSystem) <-chan struct{} {
	done, stop := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		defer close(done)
		for {
			if recs, err := harness.ReadRecords(s.be, s.prefix); err == nil && allTerminal(recs) {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return done
}

func allTerminal(recs map[string]*taskstate.Task) bool {
	for _, r := range recs {
		if !r.Status.Terminal() {
			return false
		}
	}
	return true
}

// Case 2: the broker process is killed with kill -9 mid-run and restarted
// on the same port and data: NATS with file storage, Redis with an
// append-only file fsynced on every write. No acknowledged task is lost,
// and the same api and workers carry on by themselves.
func TestFaultBrokerRestart(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		logDir := harness.LogDir(t)
		var be harness.Backend
		var kill func()
		var restart func(t *testing.T)
		if broker == "nats" {
			node := harness.NATSFileServer(t, harness.Build(t), logDir)
			be, kill, restart = harness.NATSBackend(node.URL()), node.Kill, func(t *testing.T) { node.Restart(t) }
		} else {
			rs := harness.StartRedis(t, logDir)
			be, kill, restart = rs.Backend(), rs.Kill, func(t *testing.T) { rs.Restart(t) }
		}
		s := newFaultSystem(t, be, "2s")
		s.logDir = logDir
		s.startAPI(t, "api")
		nw := pick(2, 4)
		s.startWorkers(t, nw, "--concurrency", "4")
		slots := nw * 4
		c := harness.NewClient(s.mcpURL, true)
		n, ms := pick(40, 500), pick(300, 1000)
		f := feed(c, n, ms, pick(50*time.Millisecond, 20*time.Millisecond))

		// Restart the broker once (bounded) or twice (full) while the feed
		// runs, each time after another share of it was acknowledged.
		restarts := pick(1, 2)
		for i := 1; i <= restarts; i++ {
			f.awaitAcked(t, i*n/(restarts+2))
			kill()
			time.Sleep(pick(2*time.Second, 5*time.Second)) // the outage, part of the schedule
			restart(t)
			t.Logf("broker killed and restarted (%d)", i)
		}
		ranBefore := runsPerWorker(s.workers)
		acked := f.wait(t, 5*time.Minute)

		// The api and the workers reconnected on their own: tasks created
		// now, through the same api, complete on the same workers.
		var after []string
		harness.Eventually(t, time.Minute, func() (bool, string) {
			id, err := tryStart(c, 10)
			if err != nil {
				return false, "the api takes no task after the restart: " + err.Error()
			}
			after = append(after, id)
			return true, ""
		})
		// Twice as many 8 s tasks as there are slots: one worker alone
		// would leave half of them queued for 8 s, longer than any worker
		// that is consuming again takes to ask for jobs (its pull
		// requests last 5 s), so each worker must run some.
		after = append(after, startTasks(t, c, 2*slots, 8000)...)
		recs, _ := s.settled(t, pick(2*time.Minute, 10*time.Minute), nil)
		mustHold(t, recs, append(acked, after...))
		mustComplete(t, recs, append(acked, after...))
		mustEndTerminal(t, recs)
		mustServe(t, c, recs, append(acked, after...))
		// Every worker took jobs again after the last restart.
		for i, n := range runsPerWorker(s.workers) {
			if n == ranBefore[i] {
				t.Errorf("%s ran no task after the broker came back", s.workers[i].Name)
			}
		}
		_, refused := f.counts()
		t.Logf("%d calls acknowledged, %d refused during the outage", len(acked), refused)
		s.tallyRecords(recs).report(t)
	})
}

// runsPerWorker counts each worker's "task running" lines.
func runsPerWorker(workers []*harness.Proc) []int {
	var out []int
	for _, w := range workers {
		n := 0
		for _, ls := range lines([]*harness.Proc{w}) {
			for _, l := range ls {
				if l.Message == "task running" {
					n++
				}
			}
		}
		out = append(out, n)
	}
	return out
}

// Case 3: three nats-server processes in a cluster on loopback, streams and
// buckets replicated three times; the node leading the task records is
// killed under load. Nothing is lost and the service carries on.
func TestFaultCluster(t *testing.T) {
	t.Parallel()
	logDir := harness.LogDir(t)
	cl := harness.NewNATSCluster(t, harness.Build(t), logDir, 3)
	s := newFaultSystem(t, harness.NATSBackend(cl.URLs()), "2s")
	s.logDir = logDir
	s.env = append(s.env, "MCPQ_NATS_REPLICAS=3")
	s.startAPI(t, "api")
	s.startWorkers(t, pick(2, 4), "--concurrency", "4")
	c := harness.NewClient(s.mcpURL, true)
	n, ms := pick(40, 500), pick(300, 1000)
	f := feed(c, n, ms, pick(50*time.Millisecond, 20*time.Millisecond))

	f.awaitAcked(t, n/3)
	bucket := "KV_" + s.prefix + "_tasks"
	leader, replicas := streamLeader(t, cl.URLs(), bucket)
	if replicas != 3 {
		t.Errorf("stream %s has %d replicas, want 3 (MCPQ_NATS_REPLICAS=3)", bucket, replicas)
	}
	node := cl.Node(leader)
	if node == nil {
		t.Fatalf("no node called %q leads %s", leader, bucket)
	}
	node.Kill()
	t.Logf("killed %s, the leader of %s", leader, bucket)

	acked := f.wait(t, 5*time.Minute)
	after := startTasks(t, c, 5, 10) // the service continues on two nodes
	// Read until every acknowledged record is there: a read just after the
	// failover may come from a replica still catching up.
	recs, _ := s.settled(t, pick(2*time.Minute, 10*time.Minute), holdsAll(append(acked, after...)))
	mustHold(t, recs, append(acked, after...))
	mustComplete(t, recs, append(acked, after...))
	mustEndTerminal(t, recs)
	mustServe(t, c, recs, append(acked, after...))
	_, refused := f.counts()
	t.Logf("%d calls acknowledged, %d refused around the node's death", len(acked), refused)
	s.tallyRecords(recs).report(t)
}

// streamLeader names the server leading stream, and its replica count.
func streamLeader(t *testing.T, urls, stream string) (string, int) {
	t.Helper()
	nc, js, err := harness.JetStream(urls, "fault-suite-probe")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info := st.CachedInfo()
	if info.Config.Replicas > 1 && info.Config.AllowDirect {
		t.Errorf("stream %s (R%d) allows direct gets: a follower behind the leader would answer reads", stream, info.Config.Replicas)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("stream %s has no cluster leader: %+v", stream, info.Cluster)
	}
	return info.Cluster.Leader, info.Config.Replicas
}

// Case 4: an api replica dies (SIGKILL, by its MCPQ_FAULT hook) right after
// writing a task record and before publishing its job. The client got no
// answer, but the task exists; another replica's sweeper publishes it and it
// runs exactly once, like every other task.
func TestFaultAPICrash(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newFaultSystem(t, faultBackend(t, broker), "2s")
		s.startAPI(t, "api")
		s.startWorkers(t, 2, "--concurrency", "4")
		c := harness.NewClient(s.mcpURL, true)
		f := feed(c, pick(20, 200), pick(300, 1000), pick(50*time.Millisecond, 20*time.Millisecond))

		crashes := pick(3, 10)
		for i := range crashes {
			url, p := s.startAPI(t, fmt.Sprintf("api-crashing-%d", i+1), "MCPQ_FAULT=kill-after-record")
			_, err := tryStart(harness.NewClient(url, true), pick(300, 1000))
			if err == nil {
				t.Fatalf("api-crashing-%d answered the call; MCPQ_FAULT=kill-after-record should have killed it first", i+1)
			}
			harness.Eventually(t, 20*time.Second, func() (bool, string) {
				return p.Exited(), "the crashing api is still running"
			})
		}
		acked := f.wait(t, 5*time.Minute)
		recs, _ := s.settled(t, pick(2*time.Minute, 10*time.Minute), nil)
		mustHold(t, recs, acked)
		// Each crashed api named the task it left behind; it completed.
		for _, p := range s.apis[1:] {
			var named []string
			for id, ls := range lines([]*harness.Proc{p}) {
				for _, l := range ls {
					if l.Message == "fault: killing the api between record and publish" {
						named = append(named, id)
					}
				}
			}
			if len(named) != 1 {
				t.Errorf("%s named %v as the task it died on, want one", p.Name, named)
			}
			mustHold(t, recs, named)
		}
		if orphans := len(recs) - len(acked); orphans != crashes {
			t.Errorf("%d records beyond the acknowledged calls, want one per crashed api (%d)", orphans, crashes)
		}
		mustAllComplete(t, recs)
		mustRunOnce(t, s, recs)
		s.tallyRecords(recs).report(t)
	})
}

// mustRunOnce fails unless every task's handler started exactly once
// ("task running" lines across all workers).
func mustRunOnce(t *testing.T, s *faultSystem, recs map[string]*taskstate.Task) {
	t.Helper()
	byTask := lines(s.workers)
	for id := range recs {
		runs := 0
		for _, l := range byTask[id] {
			if l.Message == "task running" {
				runs++
			}
		}
		if runs != 1 {
			t.Errorf("task %s ran %d times, want exactly once", id, runs)
		}
	}
}

// Case 5: a worker frozen (SIGSTOP) past its lease loses the task to
// another; when it thaws (SIGCONT) its late outcome must not replace the
// second worker's. "after": it thaws once the second worker finished (the
// issue's case); "during": it thaws while the second one still runs, so a
// worker without fencing would win the race to write.
func TestFaultZombie(t *testing.T) {
	t.Parallel()
	for _, broker := range brokers {
		for _, when := range []string{"after", "during"} {
			t.Run(broker+"/"+when, func(t *testing.T) {
				t.Parallel()
				s := newFaultSystem(t, faultBackend(t, broker), "2s")
				s.startAPI(t, "api")
				a := s.startWorker(t, "--concurrency", "1")
				c := harness.NewClient(s.mcpURL, true)
				id := c.StartTask(t, "wait", map[string]any{"ms": 3000})
				waitLine(t, a, id, "task running", 30*time.Second)
				if err := a.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				b := s.startWorker(t, "--concurrency", "1")
				waitLine(t, b, id, "task running", 2*time.Minute)
				if when == "after" {
					waitLine(t, b, id, "task finished", time.Minute)
				}
				before := len(lines([]*harness.Proc{a})[id])
				if err := a.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				// The thawed worker's handler returns at once (its wait is over):
				// it has something to say about the task.
				harness.Eventually(t, 30*time.Second, func() (bool, string) {
					return len(lines([]*harness.Proc{a})[id]) > before, "the thawed worker logged nothing more about the task"
				})
				tk := c.WaitStatus(t, id, time.Minute, "completed", "failed", "cancelled")
				recs, _ := s.settled(t, time.Minute, nil)
				bRun := lastLine(b, id, "task running")
				if tk.Status != "completed" || resultAttempt(recs[id]) != bRun.Attempt {
					t.Errorf("the outcome is not the second worker's (attempt %d): %s %s", bRun.Attempt, tk.Status, recs[id].Result)
				}
				if l := lastLine(a, id, "task finished"); l != nil {
					t.Errorf("the thawed worker wrote the outcome: %+v", *l)
				}
				for _, l := range lines([]*harness.Proc{a})[id][before:] {
					t.Logf("thawed worker: %s (attempt %d)", l.Message, l.Attempt)
				}
				s.tallyRecords(recs).report(t)
			})
		}
	}
}

// waitLine waits until p logged msg about task id.
func waitLine(t *testing.T, p *harness.Proc, id, msg string, within time.Duration) {
	t.Helper()
	harness.Eventually(t, within, func() (bool, string) {
		return lastLine(p, id, msg) != nil, fmt.Sprintf("%s never logged %q for %s", p.Name, msg, id)
	})
}

// lastLine is p's last log line about task id with msg, or nil.
func lastLine(p *harness.Proc, id, msg string) *logLine {
	var last *logLine
	for _, l := range lines([]*harness.Proc{p})[id] {
		if l.Message == msg {
			last = &l
		}
	}
	return last
}

// Case 6: clients cancel random tasks at random moments of a run. Every
// task whose cancel took effect stays cancelled, and every handler that was
// running one of them saw its context end.
func TestFaultCancels(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newFaultSystem(t, faultBackend(t, broker), "2s")
		s.startAPI(t, "api")
		s.startWorkers(t, pick(2, 4), "--concurrency", "4")
		c := harness.NewClient(s.mcpURL, true)
		n := pick(40, 500)
		ids := startTasks(t, c, n, 1000)

		// Cancel a random third, each after a random pause: some while
		// queued, some while running, some after they completed.
		pickd := rand.Perm(n)[:n/3]
		cancelled := map[string]bool{}
		for _, i := range pickd {
			time.Sleep(rand.N(pick(300*time.Millisecond, 150*time.Millisecond))) // the schedule
			id := ids[i]
			if err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
				t.Fatalf("tasks/cancel %s: %v", id, err)
			}
			tk, err := c.GetTask(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			switch tk.Status {
			case "cancelled":
				cancelled[id] = true
			case "completed": // the task won the race
			default:
				t.Errorf("after tasks/cancel the task is %s", tk.Status)
			}
		}
		recs, _ := s.settled(t, pick(2*time.Minute, 10*time.Minute), nil)
		for id, r := range recs {
			if cancelled[id] != (r.Status == taskstate.Cancelled) {
				t.Errorf("task %s ended %s; its cancel took effect: %v", id, r.Status, cancelled[id])
			}
			if !cancelled[id] && r.Status != taskstate.Completed {
				t.Errorf("task %s ended %s %q", id, r.Status, r.StatusMessage)
			}
		}
		// Every handler running a cancelled task observed the cancellation,
		// unless it had already returned when the cancel landed (its
		// outcome then found the task ended and was discarded).
		ran, observed := 0, 0
		for id := range cancelled {
			if len(linesWith(s.workers, id, "task running")) == 0 {
				continue
			}
			ran++
			harness.Eventually(t, 20*time.Second, func() (bool, string) {
				return len(linesWith(s.workers, id, "wait: handler observed cancellation"))+
						len(linesWith(s.workers, id, "task already ended; outcome discarded")) > 0,
					"the handler of cancelled task " + id + " never observed the cancellation"
			})
			if len(linesWith(s.workers, id, "wait: handler observed cancellation")) > 0 {
				observed++
			}
		}
		msg := fmt.Sprintf("cancel requests %d, took effect %d, of those running %d, handlers observed %d", len(pickd), len(cancelled), ran, observed)
		t.Log(msg)
		fmt.Printf("FAULTS %s: %s\n", t.Name(), msg)
		s.tallyRecords(recs).report(t)
	})
}

// linesWith is every log line of procs about task id with msg.
func linesWith(procs []*harness.Proc, id, msg string) []logLine {
	var out []logLine
	for _, l := range lines(procs)[id] {
		if strings.EqualFold(l.Message, msg) {
			out = append(out, l)
		}
	}
	return out
}

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

	// The Sentinel notices (down after 3 s) and promotes the replica.
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
