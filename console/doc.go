// Package console is the operator's task console served by api at /console/:
// an embedded static page (plain HTML, CSS and JavaScript, no build step) and
// a small JSON and server-sent-events API under /console/api/ that reads task
// records across owners, follows the store's change feed and cancels tasks
// through the producer.
//
// Besides the list, the page shows the queue per tool (GET api/queue): live
// tasks by what they wait for, the workers seen serving each tool, the
// catalog's liveness, the broker's depth (Config.Depth, to admins who see
// every tenant) and the tasks ended and failed in each of the last 15
// minutes. A task that completed with a tool error (isError) shows as
// "tool_error".
//
// The console follows the change feed only while it is in use (see
// Config.TrackIdle): an api whose console nobody opens does not decode every
// record write of the system. A task's timeline holds the steps the console
// saw on the feed (takes, input rounds, the end) and what its record tells,
// so a task picked up while nobody used the console has no pick-up time or
// attempt history on the page, only its record.
//
// With an Authenticate function configured the API answers only admins: a
// caller whose whole principal (tenant and subject, or owner key) is listed
// in Admins. The page itself holds no data; it asks for a bearer token and
// sends it with every API call.
//
// Gate is that check on its own (Host, same-origin writes, admins), which
// api also puts in front of asynqmon.
package console
