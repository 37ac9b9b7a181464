package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// ErrNoOutbox is Create's refusal of a call with a WebhookURL on a store
// that keeps no outbox (taskstate.Outbox).
var ErrNoOutbox = errors.New("producer: webhooks need a store with an outbox (taskstate.Outbox)")

// writeRecord creates t's record, after its completion webhook delivery
// when r asks for one (removed again if the record is not created).
func (p *Producer) writeRecord(ctx context.Context, r *Request, t *taskstate.Task) error {
	hooked, err := p.addWebhook(ctx, r, t)
	if err != nil {
		return err
	}
	wctx, wend := p.cfg.Telemetry.StartWrite(ctx, t.ID)
	err = p.store.Create(wctx, t)
	wend(err)
	if err != nil && hooked {
		p.dropWebhook(ctx, t.ID)
	}
	return err
}

// addWebhook writes t's completion webhook delivery, when r asks for one,
// before t's record: added says it wrote one. A delivery found there
// already (a create racing another of the same id) is left alone.
func (p *Producer) addWebhook(ctx context.Context, r *Request, t *taskstate.Task) (added bool, err error) {
	if r.WebhookURL == "" {
		return false, nil
	}
	o, ok := p.store.(taskstate.Outbox)
	if !ok {
		return false, ErrNoOutbox
	}
	err = o.AddDelivery(ctx, &taskstate.Delivery{TaskID: t.ID, Owner: t.Owner, URL: r.WebhookURL, CreatedAt: t.CreatedAt})
	if errors.Is(err, taskstate.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("producer: webhook delivery: %w", err)
	}
	return true, nil
}

// dropWebhook removes the delivery addWebhook wrote for a record that was
// not created (its id taken, or the write failed). A failure leaves it to
// the delivery loop, which drops a delivery without a record after a
// minute.
func (p *Producer) dropWebhook(ctx context.Context, id string) {
	if err := p.store.(taskstate.Outbox).RemoveDelivery(context.WithoutCancel(ctx), id); err != nil {
		p.cfg.Logger.Warn().Err(err).Str("task", id).Msg("removing the webhook delivery of a task not created")
	}
}
