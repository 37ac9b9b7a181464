package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

func printBackend(w io.Writer, c *config, r *backendRun) {
	fmt.Fprintf(w, "\n== %s: %s ==\n", r.name, r.desc)
	fmt.Fprintf(w, "%-46s %4s %9s  %15s %15s %15s  %s\n", "", "", "", "create ms", "end-to-end ms", "record ms", "CPU % of one core (200 = both cores)")
	fmt.Fprintf(w, "%-46s %4s %9s  %7s %7s %7s %7s %7s %7s  %5s %5s %6s %6s %5s %5s\n",
		"phase", "conc", "ops/s", "p50", "p99", "p50", "p99", "p50", "p99", "bench", "api", "worker", "broker", "other", "err")
	for _, res := range r.results() {
		cpu := func(k string) string {
			v, ok := res.cpu[k]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f", v)
		}
		rate := fmt.Sprintf("%.1f", res.rate())
		if res.noRate {
			rate = "(paced)"
		}
		fmt.Fprintf(w, "%-46s %4d %9s  %7s %7s %7s %7s %7s %7s  %5s %5s %6s %6s %5s %5d\n",
			res.name, res.conc, rate,
			ms(pct(res.create, .5)), ms(pct(res.create, .99)),
			ms(pct(res.e2e, .5)), ms(pct(res.e2e, .99)),
			ms(pct(res.server, .5)), ms(pct(res.server, .99)),
			cpu("bench"), cpu("api"), cpu("worker"), cpu("broker"), cpu("other"), res.errs)
	}
	fmt.Fprintf(w, "CPU time per task or call, µs:")
	for _, res := range []*result{r.ceil, r.ceilOps, r.task, r.taskAlt, r.sync} {
		if res == nil || res.rate() == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s", res.label())
		for _, k := range cpuProcs {
			if v, ok := res.cpu[k]; ok && (v >= 0.5 || k == "bench") {
				name := k
				if r.peer && k == "api" {
					name = "peer"
				}
				fmt.Fprintf(w, " %s %.0f", name, v/100/res.rate()*1e6)
			}
		}
	}
	fmt.Fprintln(w)
	if r.task != nil && r.task.redisCmds >= 0 && r.task.ops > 0 {
		fmt.Fprintf(w, "Redis commands per task (INFO total_commands_processed over the window ÷ tasks, every client on the machine counted):")
		for _, res := range []*result{r.task, r.taskAlt, r.sync, r.task1} {
			if res != nil && res.redisCmds >= 0 && res.ops > 0 {
				fmt.Fprintf(w, "  %s %.1f", res.label(), float64(res.redisCmds)/float64(res.ops))
			}
		}
		fmt.Fprintln(w)
	}
	if r.task != nil && r.ceil != nil {
		fmt.Fprintf(w, "ratios: task path ÷ ceiling = %s (÷ ceiling with worker's record ops = %s)", ratio(r.task, r.ceil), ratio(r.task, r.ceilOps))
		if r.sync != nil {
			fmt.Fprintf(w, "; sync ÷ task path = %s", ratio(r.sync, r.task))
		}
		fmt.Fprintln(w)
	}
	for _, row := range []struct {
		res  *result
		poll pollPolicy
	}{{r.task, c.poll}, {r.taskAlt, c.pollAltPolicy()}, {r.task1, c.pollOnePolicy()}, {r.long, longPolicy}} {
		res := row.res
		if res == nil || res.ops == 0 {
			continue
		}
		how := row.poll.describe()
		if row.poll.server && res.waits > 0 {
			how += fmt.Sprintf(", mean %s ms", ms(res.pollWait/time.Duration(res.waits)))
		}
		fmt.Fprintf(w, "polling %s: inline %s (%d of %d answered with the result); %.2f tasks/get per task at concurrency %d, polls %s → %.0f tasks/get/s besides %.0f tools/call/s\n",
			res.label(), inlineShare(res), res.inline, res.ops, float64(res.polls)/float64(res.ops), res.conc, how, float64(res.polls)/res.window.Seconds(), res.rate())
	}
	if r.long != nil {
		waited, rest := splitWaited(r.long.create, c.inlineWait)
		fmt.Fprintf(w, "(g) handle of the long tool %s, %d clients, calls answered in the first %s: create p50 / p99 / max = %s / %s / %s ms (n=%d); %s;\n",
			c.long, r.long.conc, r.long.window, ms(pct(r.long.create, .5)), ms(pct(r.long.create, .99)), ms(pct(r.long.create, 1)), len(r.long.create), longVerdict(c, r.long))
		fmt.Fprintf(w, "    %d waited the whole inline wait (the api had not seen the tool finish yet), max %s ms; %d got the handle sooner, p99 %s ms\n",
			len(waited), ms(pct(waited, 1)), len(rest), ms(pct(rest, .99)))
	}
	if r.sync1 != nil {
		fmt.Fprintf(w, "(e) pickup at low load: sync p50 at concurrency 1 = %s ms back-to-back", ms(pct(r.sync1.e2e, .5)))
		if r.syncRand != nil {
			fmt.Fprintf(w, ", %s ms randomly timed (n=%d)", ms(pct(r.syncRand.e2e, .5)), r.syncRand.ops)
		}
		if r.syncQuiet != nil {
			fmt.Fprintf(w, ", %s ms (p90 %s) after a quiet second, at the idle poll (n=%d)", ms(pct(r.syncQuiet.e2e, .5)), ms(pct(r.syncQuiet.e2e, .9)), r.syncQuiet.ops)
		}
		fmt.Fprintf(w, ";\n    that is queueing + pickup + record writes + HTTP + the handler's own time (%s)", c.call)
		if r.task1 != nil && len(r.task1.server) > 0 {
			fmt.Fprintf(w, "; server side (task path, one at a time, the tasks handed out), record createdAt → completed p50 = %s ms (n=%d)", ms(pct(r.task1.server, .5)), len(r.task1.server))
		}
		fmt.Fprintln(w)
	}
	if r.idle != nil {
		fmt.Fprintf(w, "(f) idle, no calls for %s: CPU %% of one core: api %.1f, worker %.1f, broker %.1f",
			r.idle.window, r.idle.cpu["api"], r.idle.cpu["worker"], r.idle.cpu["broker"])
		if r.name == "asynq" {
			fmt.Fprintf(w, "; Redis served %.0f commands/s (the worker's polls at --asynq-poll %s, Asynq's own housekeeping, and any other Redis client on the machine)", r.idleCmds, c.asynqPoll)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "durability: %s\n", r.durability)
	for _, res := range r.results() {
		if res.errs > 0 {
			fmt.Fprintf(w, "errors in %s: %d, first: %s\n", strings.TrimSpace(res.name), res.errs, res.errMsg)
		}
	}
	if r.err != nil {
		fmt.Fprintf(w, "FAILED: %v\n", r.err)
	}
}

func (r *backendRun) results() []*result {
	var out []*result
	for _, res := range []*result{r.ceil, r.ceilOps, r.task, r.taskAlt, r.sync, r.task1, r.sync1, r.syncRand, r.syncQuiet, r.long} {
		if res != nil {
			out = append(out, res)
		}
	}
	return out
}

// cpuProcs are the processes whose CPU the rows report, in column order.
var cpuProcs = []string{"bench", "api", "worker", "broker"}

// inlineShare is the share of a task row's tasks whose tools/call answered
// with the result.
func inlineShare(res *result) string {
	if res == nil || res.ops == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(res.inline)/float64(res.ops))
}

// longBound is what (g)'s create p99 is held to: the inline wait plus 5 ms.
func longBound(c *config) time.Duration { return max(c.inlineWait, 0) + 5*time.Millisecond }

// splitWaited splits sorted create latencies at the inline wait: those
// handed out after the whole wait, and the others.
func splitWaited(sorted []time.Duration, wait time.Duration) (waited, rest []time.Duration) {
	i, _ := slices.BinarySearch(sorted, max(wait, 0))
	if wait <= 0 {
		i = len(sorted)
	}
	return sorted[i:], sorted[:i]
}

// longVerdict says whether (g)'s create p99 is within longBound.
func longVerdict(c *config, res *result) string {
	p99 := pct(res.create, .99)
	switch {
	case p99 < 0:
		return "no task completed in the window: give --duration more than the tool takes"
	case p99 <= longBound(c):
		return fmt.Sprintf("p99 ≤ --inline-wait %s + 5 ms = %s ms: ok", c.inlineWait, ms(longBound(c)))
	}
	return fmt.Sprintf("p99 > --inline-wait %s + 5 ms = %s ms: EXCEEDED", c.inlineWait, ms(longBound(c)))
}

// label is the row's tag: "(a)", "(a′)", "(b)"…
func (r *result) label() string {
	l, _, _ := strings.Cut(r.name, ")")
	return l + ")"
}

func ratio(a, b *result) string {
	if a == nil || b == nil || b.rate() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a.rate()/b.rate())
}

func printSummary(w io.Writer, c *config, runs []*backendRun) {
	if len(runs) == 0 {
		return
	}
	var peer *backendRun
	width := 13
	for _, r := range runs {
		if r.peer {
			peer = r
		}
		width = max(width, utf8.RuneCountInString(r.name))
	}
	fmt.Fprintf(w, "\n== summary (concurrency %d unless noted) ==\n", c.conc)
	fmt.Fprintf(w, "%-48s", "")
	for _, r := range runs {
		fmt.Fprintf(w, " %*s", width, r.name)
	}
	fmt.Fprintln(w)
	row := func(label string, f func(r *backendRun) string) {
		fmt.Fprintf(w, "%-48s", label)
		for _, r := range runs {
			fmt.Fprintf(w, " %*s", width, f(r))
		}
		fmt.Fprintln(w)
	}
	rate := func(res *result) string {
		if res == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", res.rate())
	}
	p := func(res *result, sel func(*result) []time.Duration, qs ...float64) string {
		if res == nil {
			return "-"
		}
		var out []string
		for _, q := range qs {
			out = append(out, ms(pct(sel(res), q)))
		}
		return strings.Join(out, " / ")
	}
	e2e := func(r *result) []time.Duration { return r.e2e }
	cr := func(r *result) []time.Duration { return r.create }
	row("(a)  ceiling tasks/s", func(r *backendRun) string { return rate(r.ceil) })
	row("(a′) ceiling + worker's record ops tasks/s", func(r *backendRun) string { return rate(r.ceilOps) })
	row("(b)  task path tasks/s, polls "+c.poll.String(), func(r *backendRun) string { return rate(r.task) })
	row("(b)  answered inline", func(r *backendRun) string { return inlineShare(r.task) })
	row("(b)  create p50 / p99 ms", func(r *backendRun) string { return p(r.task, cr, .5, .99) })
	row("(b)  end-to-end p50 / p99 ms", func(r *backendRun) string { return p(r.task, e2e, .5, .99) })
	alt := c.pollAltPolicy()
	row("(b′) task path tasks/s, polls "+alt.String(), func(r *backendRun) string { return rate(r.taskAlt) })
	row("(b′) answered inline", func(r *backendRun) string { return inlineShare(r.taskAlt) })
	row("(b′) end-to-end p50 / p99 ms", func(r *backendRun) string { return p(r.taskAlt, e2e, .5, .99) })
	row("(c)  sync path calls/s", func(r *backendRun) string { return rate(r.sync) })
	row("(c)  sync p50 / p99 ms", func(r *backendRun) string { return p(r.sync, e2e, .5, .99) })
	row("(d)  task end-to-end p50 ms, one at a time", func(r *backendRun) string { return p(r.task1, e2e, .5) })
	row("(d,e) sync p50 ms, one at a time", func(r *backendRun) string { return p(r.sync1, e2e, .5) })
	row("(e)  same, randomly timed calls", func(r *backendRun) string { return p(r.syncRand, e2e, .5) })
	row("(e′) same, after a quiet second", func(r *backendRun) string { return p(r.syncQuiet, e2e, .5) })
	row(fmt.Sprintf("(g)  long tool, %d clients: create p50/p99/max", c.longConc), func(r *backendRun) string { return p(r.long, cr, .5, .99, 1) })
	row(fmt.Sprintf("(g)  create p99 ≤ %s ms (inline wait + 5)", ms(longBound(c))), func(r *backendRun) string {
		switch p99 := pct(longCreate(r), .99); {
		case p99 < 0:
			return "-"
		case p99 <= longBound(c):
			return "ok"
		}
		return "EXCEEDED"
	})
	row("task path ÷ ceiling", func(r *backendRun) string { return ratio(r.task, r.ceil) })
	row("sync ÷ task path", func(r *backendRun) string { return ratio(r.sync, r.task) })
	if peer != nil {
		vsPeer := func(f func(r *backendRun) string) func(r *backendRun) string {
			return func(r *backendRun) string {
				if r.peer {
					return "-"
				}
				return f(r)
			}
		}
		row("(b)  tasks/s ÷ peer's (b)", vsPeer(func(r *backendRun) string { return ratio(r.task, peer.task) }))
		row("(b′) tasks/s ÷ peer's (b′)", vsPeer(func(r *backendRun) string { return ratio(r.taskAlt, peer.taskAlt) }))
		row("(d)  end-to-end p50 ÷ peer's (d) p50", vsPeer(func(r *backendRun) string { return p50Ratio(r.task1, peer.task1) }))
	}
	printCPUTable(w, runs)
}

// longCreate is (g)'s create samples, if the run has (g).
func longCreate(r *backendRun) []time.Duration {
	if r.long == nil {
		return nil
	}
	return r.long.create
}

// p50Ratio is a's end-to-end p50 ÷ b's.
func p50Ratio(a, b *result) string {
	if a == nil || b == nil || len(a.e2e) == 0 || len(b.e2e) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(pct(a.e2e, .5))/float64(pct(b.e2e, .5)))
}

// printCPUTable prints the CPU time per task of each process for the task
// rows of every run, a table to paste as before/after.
func printCPUTable(w io.Writer, runs []*backendRun) {
	width := 13
	for _, r := range runs {
		width = max(width, utf8.RuneCountInString(r.name))
	}
	fmt.Fprintf(w, "\n== CPU µs per task per process (client, api, worker, broker) ==\n")
	fmt.Fprintf(w, "%-*s %-5s %9s %8s %8s %8s %8s %8s\n", width, "run", "row", "tasks/s", "client", "api", "worker", "broker", "total")
	peer := false
	for _, r := range runs {
		peer = peer || r.peer
		for _, res := range []*result{r.task, r.taskAlt, r.task1} {
			if res == nil {
				continue
			}
			fmt.Fprintf(w, "%-*s %-5s %9.0f", width, r.name, res.label(), res.rate())
			total := 0.0
			for _, k := range cpuProcs {
				v, ok := res.cpu[k]
				if !ok || res.rate() == 0 {
					fmt.Fprintf(w, " %8s", "-")
					continue
				}
				us := v / 100 / res.rate() * 1e6
				total += us
				fmt.Fprintf(w, " %8.0f", us)
			}
			fmt.Fprintf(w, " %8.0f\n", total)
		}
	}
	if peer {
		fmt.Fprintln(w, "(the peer's api column is its server process; it has no worker or broker)")
	}
}

func printNotes(w io.Writer, c *config, runs []*backendRun) {
	fmt.Fprintf(w, `
notes:
- (a) ceiling: no HTTP, no MCP. In this process, %[1]d goroutines call producer.Create (record Create
  + Queue.Enqueue) while at most %[1]d tasks are in flight; Consumer.Next with %[1]d slots takes
  each job, taskstate.Mutate writes it completed, then Ack. Same seams and configuration as the
  binaries (backend: natsbroker+natskv / asynqbroker+redisstate), own prefix.
  end-to-end = record createdAt → ack. (a′) adds the record work consumer.Worker does for this
  tool: Get, take (attempt+lease), finish, each write starting from the version just read or
  written — 1 read and 2 compare-and-set writes per task where (a) has one write.
- (b) task path: api and worker are separate processes; each client loops tools/call (tasks
  extension) → tasks/get until completed, polling %[2]s. A call the server
  answers with the result (the api's adaptive completion: it waits up to --inline-wait) is
  done in that one round trip ("inline" in the polling lines); a handle already completed is
  fetched at once; (b′) is the same with the other poll mode.
  create = the tools/call round trip (record + job durable); end-to-end = call start →
  completed seen, so it includes polling lag (up to one interval plus a tasks/get round trip);
  record = the final record's createdAt → lastUpdatedAt (api clock → worker clock, same
  machine): the server-side lifetime, without polling lag.
- (c) sync path: same tool without the tasks extension; the api creates the same record and job
  and waits on the record's change feed, answering with the result inline.
- CPU: %% of one core over the measured window, from /proc (both cores = 200). bench is this
  process (the HTTP clients; in (a) the whole in-process lifecycle), broker is nats-server or
  redis-server, other is everything else the machine ran meanwhile: a high figure there means
  another workload shared the cores and the figures are low.
- Everything shares the machine's cores: clients, api, worker and broker compete, so rates are
  lower bounds for a deployment that spreads them out.
- Asynq's poll (--asynq-poll, default 100ms; here %[3]s; --asynq-busy-poll %[6]s): Asynq does
  not block on Redis for work. When its processor finds every queue empty it sleeps
  poll/2 + rand[0, poll) — %[4]s–%[5]s here — before asking again; NATS instead has a pull
  request waiting at the server, which pushes the job at once. A worker that took a job within
  the last second is busy and polls every --asynq-busy-poll instead (asynqbroker "Busy and
  idle"): under load the queue runs dry each time the worker catches up, and without that
  every job would wait most of a poll (throughput ≈ concurrency ÷ (sleep + service time)).
  Rows (d) and (e) call again within that second, so they show the busy pickup; an idle
  worker's pickup (first call after a quiet second) is about half a poll on average, a whole
  poll at worst — run with --asynq-busy-poll equal to --asynq-poll to see it in (d) and (e).
  Idle consumers ask Redis about 1/poll times a second (row (f)), busy ones whose queue is dry
  up to 1/busy-poll.
`, c.conc, c.poll.describe(), c.asynqPoll, c.asynqPoll/2, c.asynqPoll*3/2, c.asynqBusy)
}
