// Package asynqbroker implements broker.Queue on Asynq queues and broker.Bus
// on Redis pub/sub, so a Redis-only deployment needs no NATS.
//
// # Names and routing
//
// Every name derives from Config.Prefix (default "mcpq"). Each pool of
// workers has one Asynq queue, <prefix>.pool.<pool> (PoolQueueName), whose
// pending jobs are the Redis list asynq:{<prefix>.pool.<pool>}:pending: the
// list an autoscaler of the pool watches. Enqueue asks Config.Pools (the
// catalog: the pool its workers published a route with) which pool serves
// the job's route and puts the job on that pool's queue; a route no pool is
// known for goes to the route's own queue, <prefix>.tool.<route>
// (QueueName). A consumer (ConsumerOptions.Pool, default
// broker.DefaultPool) takes jobs from its pool's queue with Asynq's own
// dequeue, one per job, and from the own queues of the routes it serves,
// which it looks at about twice per PollInterval (see "Many tools"); so a
// job only ever runs on a worker that has its handler, and a route's jobs
// wait while no worker serves it. The bus channels start with <prefix>:bus.
//
// # Pools
//
// A consumer handed a job of a route it does not serve (a pool redefined,
// a catalog entry naming the other of two pools that served the route a
// moment ago, a worker of the pool that serves fewer tools) moves it to the
// route's own queue: the same Asynq task id and payload there, and the
// copy it came from completes with the result "moved to <queue>: <why>"
// (asynqmon shows it). A job of a route with a MaxConcurrency the consumer
// has no room for moves the same way; the route's own lane (below) takes
// it from there at its bound. A move is not a delivery: the copy is
// delivered first as if new, and the task record's attempt does not change
// (the worker never saw the job). Jobs left in the queue of a pool that no
// longer serves their route and has no worker are not held (Holds asks the
// route's own queue and its pool's now), so the reaper republishes them to
// the pool that does.
//
// # Jobs
//
// A job is an Asynq task whose type is the tool name, whose payload is the
// JSON job and whose Asynq task id is the job's dedupe key. Enqueuing an id
// that Asynq still holds (pending, running, waiting to retry, archived, or
// finished within Config.Dedupe) fails with asynq.ErrTaskIDConflict, which
// Enqueue reports as success: the job is already there.
//
// # The pull bridge
//
// Asynq pushes: its Server dequeues a task and calls a handler. Our Consumer
// is pulled: Next hands out one job per free worker slot. A Consumer runs an
// asynq.Server (one at a time taking jobs; see Busy and idle) with
// Concurrency = its slots (ConsumerOptions.Slots, else Config.Concurrency)
// on its pool's queue and the own queues of the tools without a
// MaxConcurrency, and one per tool with a MaxConcurrency (Concurrency = that
// bound) on the tool's own queue, each one a lane. A capped tool's
// deliveries share its bound across the lanes: the shared lane hands out a
// job of the tool from the pool's queue while there is room, else moves it
// to the tool's own queue. Every lane's
// handler passes the delivery to a Next caller over one unbuffered channel —
// so a job either comes out of a Next or stays with the handler for the
// following one, even when that Next's ctx ends at the same moment. A server
// dequeues whenever it has a free handler, so a job can wait in a handler
// while every slot is busy: at most the slots plus the capped tools' bounds
// at once. If no Next takes it within the lease it is handed back to the
// queue (not counted as a delivery) for another consumer. Once a Next has
// it, the handler blocks until the worker settles it:
//
//	Ack          handler returns nil: the task completes and is kept for
//	             Config.Dedupe (Asynq Retention) so its id stays taken.
//	Retry(d)     handler returns an error; the RetryDelayFunc reads d from
//	             it. Asynq schedules retries in whole seconds, so a delay
//	             d > 0 is rounded up: redelivery comes after d and before
//	             d + 1s + PollInterval. The delivery count goes up by one.
//	Term(reason) handler returns reason wrapping asynq.SkipRetry: the task
//	             is archived with reason as its last error.
//	Extend       renews the delivery's lease (below).
//
// Delivered is Asynq's retry count + 1.
//
// # Busy and idle
//
// Asynq does not block on Redis for work: when its processor finds every
// queue empty it sleeps PollInterval/2 + rand[0, PollInterval) before it looks
// again. A lane that keeps up with its load finds its queues empty every time
// it catches up, so under load each job would wait most of a PollInterval
// too — a closed loop of quick jobs then runs at about slots ÷ PollInterval,
// whatever the CPUs allow. So each lane paces itself: once it has handed a
// job out it is busy, and a server polling every BusyPollInterval takes jobs
// until BusyFor passes without a hand-out; then a server polling every
// PollInterval takes over again. Idle lanes cost Redis what PollInterval
// says; a busy one whose queues are dry asks up to 1/BusyPollInterval times
// a second. Changing pace starts a new asynq.Server and retires the old one
// (it takes no more jobs and shuts down once the jobs it holds are settled);
// see lane.pace for why it waits until the lane holds no job.
//
// # Many tools
//
// Asynq's processor looks for a job by running its dequeue script on each of
// a server's queues in turn, one round trip per queue, and its forwarder runs
// two scripts per queue every PollInterval. The jobs of all of a pool's tools
// are in one queue, so a job costs one dequeue; the tools' own queues are
// there for the few jobs that go there (no pool known yet, a move), and a
// consumer's servers talk to Redis through a sieve: it reads the length of
// every own queue's pending list in one pipelined call (at most once per half
// PollInterval) and the earliest entry of every scheduled and retry set (the
// pool queue's too, as often), and answers those scripts itself for the
// queues with nothing for them. A job that lands in an own queue the sieve
// has just seen empty waits at most that half poll longer. See sieve.go.
//
// # Leases and crash recovery
//
// The lease of a tool (ToolRoute.Lease, else ConsumerOptions.Lease) is
// enforced by the bridge: a delivery that is neither settled nor extended
// within it is taken back from the worker and retried at once (archived if
// it was the last allowed delivery), like an expired JetStream AckWait;
// Extend restarts that timer. Asynq's own lease is a separate, process-level
// one: while the handler blocks, the asynq.Server renews it every 5s,
// whatever the worker does.
//
// If the whole worker process dies, nothing renews Asynq's lease. Asynq v0.26
// hard-codes that lease at 30s (rdb.LeaseDuration), and its recoverer, which
// runs in every live asynq.Server once a minute, retries only tasks whose
// lease expired more than 30s ago. A crashed worker's job therefore comes back
// 60 to 120 seconds after the last renewal (plus PollInterval), provided some
// consumer of the queue is running. None of these three numbers is
// configurable in v0.26. (TestCrashRecovery, run with MCPQ_SLOW_TESTS=1,
// kills a worker process holding a job and measures this.) mcpqueue's own
// reaper (producer.Reap) requeues such a task within the tool's lease.
//
// A tool's MaxDeliveries (else the consumer's) is enforced by the bridge
// too: a delivery past it is archived instead of handed out, and a Retry or
// lease expiry of the last allowed delivery archives the job. Asynq's own
// per-task MaxRetry is fixed at enqueue, before any consumer exists, so
// Enqueue sets it from Config.MaxDeliveries as a ceiling; the effective
// bound is the smaller one.
//
// # Shutdown
//
// When a Consumer's ctx ends (or the Queue is closed), jobs still waiting in
// a handler for a Next are given back at once (as a retry due now that does
// not count as a delivery), its servers stop dequeuing, and deliveries the
// worker still holds get Config.ShutdownTimeout to be settled; whatever is
// left is then taken back from the worker and given back the same way.
package asynqbroker
