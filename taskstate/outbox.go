package taskstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Outbox is an optional ability of a Store (completion webhooks, issue
// #32): it keeps the deliveries still to be made, one per task, apart from
// the records, so that the api that delivers them reads only what is
// pending (its cost follows the pending deliveries, not the records kept)
// and a delivery written with its task survives a crash of the api that
// wrote it. The api writes a task's delivery before its record; the
// delivery loop (package webhook) reads the record of each, sends it once
// the task is terminal and removes it once it was received or given up.
type Outbox interface {
	// AddDelivery stores d, a task's pending delivery, under d.TaskID;
	// ErrExists if the task has one already (nothing is changed then).
	AddDelivery(ctx context.Context, d *Delivery) error
	// PutDelivery replaces a stored delivery (its attempts, next try and
	// body); ErrNotFound if there is none.
	PutDelivery(ctx context.Context, d *Delivery) error
	// RemoveDelivery removes a task's delivery (nil when there is none).
	RemoveDelivery(ctx context.Context, taskID string) error
	// Deliveries calls fn with every pending delivery, in no particular
	// order, until fn returns false. Its cost grows with the pending
	// deliveries only.
	Deliveries(ctx context.Context, fn func(*Delivery) bool) error
	// CountDeliveries returns how many of owner's deliveries are pending
	// ("" owns nothing: 0).
	CountDeliveries(ctx context.Context, owner string) (int, error)
}

// Delivery is one pending completion webhook: the POST of a task's outcome
// to URL once the task is terminal.
type Delivery struct {
	TaskID string `json:"taskId"`
	Owner  string `json:"owner,omitempty"`
	URL    string `json:"url"`
	// CreatedAt is when the delivery (and its task) was written.
	CreatedAt time.Time `json:"createdAt"`
	// Attempts counts the POSTs tried so far; NextAt is when the next
	// one is due (zero: as soon as the task is terminal).
	Attempts int       `json:"attempts,omitempty"`
	NextAt   time.Time `json:"nextAt,omitzero"`
	// FirstAt is when the first attempt was made (the retries' 24 hours
	// count from it).
	FirstAt time.Time `json:"firstAt,omitzero"`
	// Body is the payload, fixed at the first attempt so every retry
	// sends the same bytes (the record may expire meanwhile).
	Body json.RawMessage `json:"body,omitempty"`
	// LastError says why the last attempt failed.
	LastError string `json:"lastError,omitempty"`
}

// EncodeDelivery and DecodeDelivery are the one serialization every Outbox
// uses. EncodeDelivery refuses a delivery whose TaskID ValidID rejects.
func EncodeDelivery(d *Delivery) ([]byte, error) {
	if !ValidID(d.TaskID) {
		return nil, fmt.Errorf("taskstate: delivery: invalid task id %q", d.TaskID)
	}
	if d.URL == "" {
		return nil, errors.New("taskstate: delivery: no URL")
	}
	return json.Marshal(d)
}

// DecodeDelivery reads a delivery stored by EncodeDelivery.
func DecodeDelivery(b []byte) (*Delivery, error) {
	var d Delivery
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("taskstate: decode delivery: %w", err)
	}
	return &d, nil
}
