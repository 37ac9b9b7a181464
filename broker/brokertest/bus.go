package brokertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// busWait bounds every wait for a bus message that should arrive.
const busWait = 10 * time.Second

// The suite uses broker.TopicCancel (its wildcard subscription is what every
// worker holds) and two topics of its own: a bus carries any topic name made
// of letters.
const (
	topicA broker.Topic = "brokertesta"
	topicB broker.Topic = "brokertestb"
)

// RunBus runs the bus contract suite as parallel subtests of t. newBus
// returns a bus that no other subtest hears.
//
// In production the publisher (an api replica) and the subscriber (a
// worker) are different processes; for "subscribe, then publish" to be
// tested for real, the bus newBus returns should publish over a different
// connection than it subscribes on (see SplitBus).
//
// A bus puts task ids into its subject or channel names, so it refuses any
// that is not a plain name (broker.SafeName).
func RunBus(t *testing.T, newBus func(t *testing.T) broker.Bus) {
	tests := []subtest[*busEnv]{
		{"PerTask", busPerTask},
		{"TopicsSeparate", busTopicsSeparate},
		{"Wildcard", busWildcard},
		{"Close", busClose},
		{"SubscribeThenPublish", busSubscribeThenPublish},
		{"PublishEmptyTaskID", busPublishEmptyTaskID},
		{"RefusesUnsafeTaskIDs", busRefusesUnsafeTaskIDs},
	}
	runSubtests(t, tests, "newBus", newBus, 6*busWait, func(ctx context.Context, b broker.Bus) *busEnv {
		return &busEnv{ctx: ctx, bus: b}
	})
}

// SplitBus publishes on Pub and subscribes on Sub: two buses over
// different connections, as an api replica and a worker hold them, so that
// RunBus's "subscribe, then publish" crosses connections.
type SplitBus struct{ Pub, Sub broker.Bus }

// Publish publishes on Pub.
func (b SplitBus) Publish(ctx context.Context, topic broker.Topic, taskID string, data []byte) error {
	return b.Pub.Publish(ctx, topic, taskID, data)
}

// Subscribe subscribes on Sub.
func (b SplitBus) Subscribe(ctx context.Context, topic broker.Topic, taskID string, fn func(string, []byte)) (broker.Subscription, error) {
	return b.Sub.Subscribe(ctx, topic, taskID, fn)
}

type busEnv struct {
	ctx context.Context
	bus broker.Bus
}

type busMsg struct {
	taskID string
	data   []byte
}

// recorder collects what a subscription's callback receives.
type recorder struct{ ch chan busMsg }

func newRecorder() *recorder { return &recorder{ch: make(chan busMsg, 1024)} }

func (r *recorder) fn(taskID string, data []byte) {
	r.ch <- busMsg{taskID, bytes.Clone(data)}
}

// expect waits for the next message and fails unless it is (taskID, data).
func (r *recorder) expect(t *testing.T, what, taskID string, data []byte) {
	t.Helper()
	select {
	case m := <-r.ch:
		if m.taskID != taskID || !bytes.Equal(m.data, data) {
			t.Fatalf("%s: got (%q, %q), want (%q, %q)", what, m.taskID, m.data, taskID, data)
		}
	case <-time.After(busWait):
		t.Fatalf("%s: nothing received within %s (want (%q, %q))", what, busWait, taskID, data)
	}
}

// empty fails if r holds a message now.
func (r *recorder) empty(t *testing.T, what string) {
	t.Helper()
	select {
	case m := <-r.ch:
		t.Fatalf("%s: unexpected message (%q, %q)", what, m.taskID, m.data)
	default:
	}
}

func (e *busEnv) subscribe(t *testing.T, topic broker.Topic, taskID string, r *recorder) broker.Subscription {
	t.Helper()
	sub, err := e.bus.Subscribe(e.ctx, topic, taskID, r.fn)
	if err != nil {
		t.Fatalf("Subscribe(%s, %q): %v", topic, taskID, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func (e *busEnv) publish(t *testing.T, topic broker.Topic, taskID string, data []byte) {
	t.Helper()
	if err := e.bus.Publish(e.ctx, topic, taskID, data); err != nil {
		t.Fatalf("Publish(%s, %q): %v", topic, taskID, err)
	}
}

// taskID returns a fresh task id, like taskstate.NewID.
func taskID() string { return rand.Text() }

func busPerTask(t *testing.T, e *busEnv) {
	a, b := taskID(), taskID()
	ra, rb := newRecorder(), newRecorder()
	e.subscribe(t, topicA, a, ra)
	e.subscribe(t, topicA, b, rb)

	// One publisher, in this order: b's message first, so if a's
	// subscription wrongly heard it, it would come before a's own.
	e.publish(t, topicA, b, []byte("for b"))
	e.publish(t, topicA, a, []byte("for a"))
	ra.expect(t, "subscriber of a", a, []byte("for a"))
	rb.expect(t, "subscriber of b", b, []byte("for b"))

	// Binary and empty payloads arrive as sent.
	bin := []byte{0, 1, 2, 0xff, '\r', '\n', 0}
	e.publish(t, topicA, a, bin)
	e.publish(t, topicA, a, nil)
	e.publish(t, topicA, b, []byte("b again"))
	ra.expect(t, "binary payload", a, bin)
	ra.expect(t, "empty payload", a, []byte{})
	rb.expect(t, "subscriber of b", b, []byte("b again"))
	ra.empty(t, "subscriber of a")
	rb.empty(t, "subscriber of b")
}

func busTopicsSeparate(t *testing.T, e *busEnv) {
	id := taskID()
	rc, ra := newRecorder(), newRecorder()
	e.subscribe(t, broker.TopicCancel, id, rc)
	e.subscribe(t, topicA, id, ra)

	e.publish(t, topicA, id, []byte("answer"))
	e.publish(t, topicB, id, []byte("progress"))
	e.publish(t, broker.TopicCancel, id, []byte("stop"))
	rc.expect(t, "cancel subscriber", id, []byte("stop"))
	ra.expect(t, "topic A subscriber", id, []byte("answer"))

	// Flush both with one more message each, then nothing else may be there.
	e.publish(t, broker.TopicCancel, id, []byte("stop 2"))
	e.publish(t, topicA, id, []byte("answer 2"))
	rc.expect(t, "cancel subscriber", id, []byte("stop 2"))
	ra.expect(t, "topic A subscriber", id, []byte("answer 2"))
	rc.empty(t, "cancel subscriber")
	ra.empty(t, "topic A subscriber")
}

func busWildcard(t *testing.T, e *busEnv) {
	all := newRecorder()
	e.subscribe(t, broker.TopicCancel, "", all)
	ids := []string{taskID(), taskID(), taskID()}

	e.publish(t, topicA, ids[0], []byte("not a cancel"))
	for i, id := range ids {
		e.publish(t, broker.TopicCancel, id, fmt.Appendf(nil, "cancel %d", i))
	}
	for i, id := range ids {
		all.expect(t, fmt.Sprintf("wildcard message %d", i), id, fmt.Appendf(nil, "cancel %d", i))
	}
	e.publish(t, broker.TopicCancel, ids[0], []byte("last"))
	all.expect(t, "wildcard message after the others", ids[0], []byte("last"))
	all.empty(t, "wildcard subscriber")
}

func busClose(t *testing.T, e *busEnv) {
	id := taskID()
	closed, open := newRecorder(), newRecorder()
	sub := e.subscribe(t, topicA, id, closed)
	e.subscribe(t, topicA, id, open)

	e.publish(t, topicA, id, []byte("1"))
	closed.expect(t, "subscription before Close", id, []byte("1"))
	open.expect(t, "other subscription", id, []byte("1"))

	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.publish(t, topicA, id, []byte("2"))
	e.publish(t, topicA, id, []byte("3"))
	open.expect(t, "other subscription", id, []byte("2"))
	open.expect(t, "other subscription", id, []byte("3"))
	closed.empty(t, "closed subscription")

	// A closed wildcard subscription hears nothing either.
	wild := newRecorder()
	wsub := e.subscribe(t, topicA, "", wild)
	if err := wsub.Close(); err != nil {
		t.Fatalf("Close of wildcard subscription: %v", err)
	}
	e.publish(t, topicA, id, []byte("4"))
	open.expect(t, "other subscription", id, []byte("4"))
	wild.empty(t, "closed wildcard subscription")
}

func busSubscribeThenPublish(t *testing.T, e *busEnv) {
	for i := range 40 {
		id := taskID()
		r := newRecorder()
		topic := topicA
		sid := id
		if i%2 == 1 {
			topic, sid = broker.TopicCancel, "" // wildcard subscriptions too
		}
		sub := e.subscribe(t, topic, sid, r)
		e.publish(t, topic, id, []byte("right away"))
		r.expect(t, fmt.Sprintf("round %d: message published right after Subscribe returned", i), id, []byte("right away"))
		if err := sub.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func busPublishEmptyTaskID(t *testing.T, e *busEnv) {
	all := newRecorder()
	e.subscribe(t, broker.TopicCancel, "", all)
	if err := e.bus.Publish(e.ctx, broker.TopicCancel, "", []byte("to nobody")); err == nil {
		t.Fatal("Publish with an empty task id succeeded")
	}
	id := taskID()
	e.publish(t, broker.TopicCancel, id, []byte("real"))
	all.expect(t, "wildcard subscriber", id, []byte("real"))
	all.empty(t, "wildcard subscriber")
}

// busRefusesUnsafeTaskIDs: a task id that is not one plain name could widen
// a subscription (a subject wildcard, a glob) or reach another channel, so
// Publish and Subscribe refuse it.
func busRefusesUnsafeTaskIDs(t *testing.T, e *busEnv) {
	for _, id := range []string{"a.b", "*", ">", "x.>", "?", "a*", "[ab]", "x:y", "a b", "a\r\nb", "tab\there", "ÄÖÜ"} {
		if err := e.bus.Publish(e.ctx, broker.TopicCancel, id, nil); err == nil {
			t.Errorf("Publish with task id %q succeeded", id)
		}
		sub, err := e.bus.Subscribe(e.ctx, broker.TopicCancel, id, func(string, []byte) {})
		if err == nil {
			_ = sub.Close()
			t.Errorf("Subscribe with task id %q succeeded", id)
		}
	}
}
