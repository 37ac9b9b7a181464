package memstate

import (
	"context"
	"sync"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// outbox holds the pending deliveries of completion webhooks, encoded, by
// task id. Its zero value is empty.
type outbox struct {
	mu   sync.Mutex
	byID map[string]outboxEntry
}

type outboxEntry struct {
	owner string
	data  []byte
}

// AddDelivery implements taskstate.Outbox.
func (s *Store) AddDelivery(ctx context.Context, d *taskstate.Delivery) error {
	return s.outbox.put(d, true)
}

// PutDelivery implements taskstate.Outbox.
func (s *Store) PutDelivery(ctx context.Context, d *taskstate.Delivery) error {
	return s.outbox.put(d, false)
}

func (o *outbox) put(d *taskstate.Delivery, create bool) error {
	b, err := taskstate.EncodeDelivery(d)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, had := o.byID[d.TaskID]
	switch {
	case create && had:
		return taskstate.ErrExists
	case !create && !had:
		return taskstate.ErrNotFound
	}
	if o.byID == nil {
		o.byID = map[string]outboxEntry{}
	}
	o.byID[d.TaskID] = outboxEntry{owner: d.Owner, data: b}
	return nil
}

// RemoveDelivery implements taskstate.Outbox.
func (s *Store) RemoveDelivery(ctx context.Context, taskID string) error {
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	delete(s.outbox.byID, taskID)
	return nil
}

// Deliveries implements taskstate.Outbox.
func (s *Store) Deliveries(ctx context.Context, fn func(*taskstate.Delivery) bool) error {
	s.outbox.mu.Lock()
	all := make([][]byte, 0, len(s.outbox.byID))
	for _, e := range s.outbox.byID {
		all = append(all, e.data)
	}
	s.outbox.mu.Unlock()
	for _, b := range all {
		d, err := taskstate.DecodeDelivery(b)
		if err != nil {
			return err
		}
		if !fn(d) {
			return nil
		}
	}
	return nil
}

// CountDeliveries implements taskstate.Outbox.
func (s *Store) CountDeliveries(ctx context.Context, owner string) (int, error) {
	if owner == "" {
		return 0, nil
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	n := 0
	for _, e := range s.outbox.byID {
		if e.owner == owner {
			n++
		}
	}
	return n, nil
}
