// Package console is the operator's task console served by api at /console/:
// an embedded static page (plain HTML, CSS and JavaScript, no build step) and
// a small JSON and server-sent-events API under /console/api/ that reads task
// records across owners, follows the store's change feed and cancels tasks
// through the producer.
//
// The console follows the change feed only while it is in use (see
// Config.TrackIdle): an api whose console nobody opens does not decode every
// record write of the system. The attempts it shows for a task are those it
// saw start, so a task picked up while nobody used the console has no
// pick-up time or attempt history on the page, only its record.
//
// With an Authenticate function configured the API answers only admins: a
// caller whose whole principal (tenant and subject, or owner key) is listed
// in Admins. The page itself holds no data; it asks for a bearer token and
// sends it with every API call.
//
// Gate is that check on its own (Host, same-origin writes, admins), which
// api also puts in front of asynqmon.
package console
