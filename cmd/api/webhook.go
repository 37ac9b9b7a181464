package main

import (
	"context"
	"errors"
	"flag"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/webhook"
)

// webhookFlags configure completion webhooks (issue #32, package webhook).
type webhookFlags struct {
	allow      string
	secret     string
	retryBase  time.Duration
	retryFor   time.Duration
	interval   time.Duration
	maxPending int

	list *webhook.AllowList // parsed --webhook-allow; nil: webhooks off
	key  []byte
}

func (h *webhookFlags) flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.String(&h.allow, "webhook-allow", "MCPQ_WEBHOOK_ALLOW", "", "completion webhooks: the hosts and networks (comma-separated host names, IP addresses, CIDRs) a tools/call's _meta[\"io.mcpqueue/webhook\"] url may name; every dialled address is checked too (a listed name may reach public addresses only); empty: webhooks are off")
	e.String(&h.secret, "webhook-secret", "MCPQ_WEBHOOK_SECRET", "", "completion webhooks: the key that signs every delivery (Standard Webhooks webhook-signature), whsec_<base64> or at least 16 bytes of text; required with --webhook-allow")
	e.Secret("webhook-secret")
	e.Duration(&h.retryBase, "webhook-retry-base", "MCPQ_WEBHOOK_RETRY_BASE", 5*time.Second, "completion webhooks: the wait after a failed attempt, doubled after each further failure, up to 1h")
	e.Duration(&h.retryFor, "webhook-retry-for", "MCPQ_WEBHOOK_RETRY_FOR", 24*time.Hour, "completion webhooks: how long after its first attempt a delivery is retried before it is given up")
	e.Duration(&h.interval, "webhook-interval", "MCPQ_WEBHOOK_INTERVAL", time.Second, "completion webhooks: how often the api holding the webhook lease looks over the pending deliveries")
	e.Int(&h.maxPending, "webhook-max-pending", "MCPQ_WEBHOOK_MAX_PENDING", 1000, "completion webhooks: deliveries one principal may have pending (tasks not ended, retries waiting); past it a call asking for one gets -32029; 0: no cap")
}

// check parses the flags: with --webhook-allow, --webhook-secret is
// required.
func (h *webhookFlags) check() error {
	list, err := webhook.ParseAllowList(h.allow)
	if err != nil {
		return errors.New("--webhook-allow: " + err.Error())
	}
	if list == nil {
		if h.secret != "" {
			return errors.New("--webhook-secret needs --webhook-allow (without it webhooks are off)")
		}
		return nil
	}
	if h.secret == "" {
		return errors.New("--webhook-allow needs --webhook-secret: every delivery is signed")
	}
	if h.key, err = webhook.ParseSecret(h.secret); err != nil {
		return errors.New("--webhook-secret: " + err.Error())
	}
	h.list = list
	return nil
}

// start runs the delivery loop until ctx ends, when webhooks are on.
func (h *webhookFlags) start(ctx context.Context, b *backend.Backend, reg prometheus.Registerer, wg *sync.WaitGroup, log zerolog.Logger) error {
	if h.list == nil {
		return nil
	}
	d, err := webhook.New(b.Store, &webhook.Config{
		Allow: h.list, Key: h.key, RetryBase: h.retryBase, RetryFor: h.retryFor, Interval: h.interval,
		Registerer: reg, Logger: log.With().Str("component", "webhook").Logger(),
	})
	if err != nil {
		return err
	}
	wg.Go(func() { d.Run(ctx) })
	return nil
}
