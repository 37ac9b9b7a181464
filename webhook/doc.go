// Package webhook sends signed completion webhooks (issue #32): a
// tools/call with _meta["io.mcpqueue/webhook"]: {"url": …} gets one POST
// of its task's outcome to that URL once the task is terminal, whoever
// wrote the terminal status (a worker, the api, the reaper).
//
// The api writes the delivery into the store's outbox
// (taskstate.Outbox) before the task's record, so no crash loses it; a
// Deliverer in the api (one replica at a time, by the store's "webhook"
// lease) goes over the outbox every Interval, POSTs each delivery whose
// task has ended, signed the Standard Webhooks way
// (https://www.standardwebhooks.com: webhook-id, webhook-timestamp,
// webhook-signature), and retries a failed attempt with a doubling
// backoff for 24 hours. Only hosts and networks of an AllowList are ever
// dialled, the address actually dialled included, and redirects are not
// followed.
//
// A receiver checks a delivery with Verify and drops a retry it has seen
// by the webhook-id it returns.
package webhook
