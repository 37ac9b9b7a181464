// Package natsbroker implements broker.Queue on a JetStream work-queue stream
// and broker.Bus on core NATS subjects.
//
// # Names
//
// Every name derives from Config.Prefix (default "mcpq"), so an api and
// workers built apart agree on them (Names):
//
//	stream    <PREFIX>_JOBS              (the prefix upper-cased)
//	subjects  <prefix>.jobs.<token>.<task id>
//	consumer  tool_<token>               (one durable pull consumer per tool)
//	bus       <prefix>.bus.<topic>.<task id>
//
// where token is the tool name when it holds only letters, digits, "_" and
// "-", and otherwise the name with every other character replaced by "_"
// followed by "_" and the first 8 hex digits of its SHA-256 (Token), so two
// tools never share a subject or a consumer.
//
// # Jobs and routing
//
// A job is published to its task's subject with the dedupe key as
// Nats-Msg-Id, so a re-publish inside the stream's duplicate window is stored
// once. A job that carries its task's record (broker.Job.Record) is sent in
// a compact form, the record in place of the arguments and meta it holds
// (job.go); Withdraw (broker.Withdrawer) purges a task's subject, and acks
// are plain, not acks with a reply. Each tool has its own durable consumer, filtered on the tool's
// subjects, whose AckWait is the tool's lease (renewed with InProgress) and
// whose MaxDeliver is the tool's; a worker pulls from the consumers of the
// tools it serves and from no other, so a job only ever reaches a worker that
// has its handler, and pools that serve different tools never share, or
// overwrite, a consumer's settings. A tool's jobs wait in the stream while no
// worker serves it; they are delivered when one starts.
//
// A Consumer pulls with batches of one and never holds more open pull
// requests than it has callers of Next waiting, so it never takes a job no
// slot is free to run. Each waiting Next pulls on one tool: first a tool
// whose last delivery said more jobs were pending, then a hot tool (one that
// delivered within the last second), else the tool with the fewest open
// pulls; pulls last up to a second, so an idle worker looks at every tool
// within a second. While a tool is hot, waiting slots pull on hot tools
// only: a slot parked in a pull on an idle tool is one the busy tool lacks,
// so what a job costs does not depend on how many tools the worker serves.
// One waiting Next, the sweeper, checks the tools no pull covers (more
// tools than waiting slots, or idle ones while another is hot), without
// waiting (a no-wait fetch each), every 250 ms; those tools also listen on
// their job subjects (core NATS), and a job published on one wakes the
// sweeper, which then fetches it at once. A job of an uncovered tool whose
// signal was missed (a redelivery, a job published as the tool cooled)
// waits at most about 250 ms for an idle worker. A tool's MaxConcurrency
// caps its open pulls plus its deliveries not yet settled.
package natsbroker
