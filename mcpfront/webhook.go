package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Completion webhooks (issue #32): a tools/call whose _meta carries
// vocab.MetaWebhook {"url": …} gets its outcome POSTed there once its task
// is terminal. The URL is checked here, before anything is written: its
// host must be in Config.Webhooks (else -32602 naming the host; with none,
// -32602 "webhooks are off"), and its owner must have fewer than
// Config.MaxPendingWebhooks deliveries pending (else -32029). The
// producer writes the delivery to the store's outbox with the record;
// package webhook delivers it.

// webhookURL reads the call's webhook request from its _meta: "" when
// there is none, the URL when it may be accepted, else the refusal.
func (s *Server) webhookURL(ctx context.Context, owner string, meta map[string]json.RawMessage) (string, *rpcError) {
	raw, ok := meta[vocab.MetaWebhook]
	if !ok {
		return "", nil
	}
	field := fmt.Sprintf("_meta[%q]", vocab.MetaWebhook)
	if s.cfg.Webhooks == nil {
		return "", invalidParams(fmt.Sprintf("webhooks are off on this server (its --webhook-allow is empty): call without %s", field))
	}
	var hook struct {
		URL *string `json:"url"`
	}
	if err := json.Unmarshal(raw, &hook); err != nil || hook.URL == nil {
		return "", invalidParams(fmt.Sprintf(`invalid %s: must be an object {"url": "https://…"}`, field))
	}
	if _, err := s.cfg.Webhooks.CheckURL(*hook.URL); err != nil {
		return "", invalidParams(fmt.Sprintf("invalid %s: %v", field, err)).withData(map[string]any{"url": *hook.URL})
	}
	if rerr := s.admitWebhook(ctx, owner); rerr != nil {
		return "", rerr
	}
	return *hook.URL, nil
}

// admitWebhook refuses a webhook to an owner with MaxPendingWebhooks
// deliveries pending. Like MaxActiveTasks, concurrent calls may pass the
// check together.
func (s *Server) admitWebhook(ctx context.Context, owner string) *rpcError {
	if s.cfg.MaxPendingWebhooks <= 0 || owner == "" {
		return nil
	}
	o, ok := s.store.(taskstate.Outbox)
	if !ok {
		return s.internal("counting pending webhooks", errors.New("the store keeps no outbox"))
	}
	n, err := o.CountDeliveries(ctx, owner)
	if err != nil {
		return s.internal("counting pending webhooks", err)
	}
	if n >= s.cfg.MaxPendingWebhooks {
		return errorf(vocab.CodeLimited, http.StatusOK, fmt.Sprintf("too many pending webhooks: at most %d may wait for delivery at once (--webhook-max-pending); wait for some to be delivered", s.cfg.MaxPendingWebhooks)).
			withData(map[string]any{"maxPendingWebhooks": s.cfg.MaxPendingWebhooks})
	}
	return nil
}
