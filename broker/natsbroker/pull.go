package natsbroker

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// One long-lived pull subscription per consumer (issue 29): every pull
// request a Next sends is a raw JetStream pull ($JS.API.CONSUMER.MSG.NEXT)
// whose reply subject is <inbox>.<n>, n counting the consumer's requests,
// and one wildcard subscription on <inbox>.* receives every route's
// deliveries and status messages. A jetstream Fetch instead subscribes a
// fresh inbox for each request and unsubscribes it after (a SUB and an
// UNSUB per pull at the server, and a goroutine and timers in the worker).
//
// A status message (404 no messages, 408 expired, 409 …) arrives on the
// reply subject of the request it ends, so it goes to that request. A job
// keeps its own subject, so it says only which consumer (route) sent it:
// it goes to the route's oldest open request, the one JetStream serves
// first (its waiting requests are a queue). Should they differ, the Next
// whose request was used waits out its request (no 408 comes for it) and
// pulls again; the other request, still open, serves the next job.
//
// Each request asks for one message and each open request has one Next
// waiting on it, so a Next still gets at most one delivery (never more
// than Slots handed out, MaxConcurrency counted per open pull as before).
// A job that arrives when no Next of its route waits any more (one gave
// up; the server keeps its request open until it expires) is handed back
// at once with a Nak, not left to sit out a lease.

// pullGrace is how long past its expiry a request waits for the server's
// answer (a 408, or for a no-wait request a 404) before it counts as
// expired empty: the request or its answer may be lost in a reconnect.
const pullGrace = time.Second

// puller owns the consumer's pull subscription and its open requests.
type puller struct {
	nc     *nats.Conn
	prefix string // the JetStream API prefix, "$JS.API." by default
	inbox  string

	mu      sync.Mutex
	sub     *nats.Subscription
	n       uint64
	waiting map[uint64]*open    // by request number
	queue   map[string][]uint64 // by durable: its open requests, oldest first
	closed  bool
}

// open is a request a Next waits on.
type open struct {
	durable string
	ch      chan *nats.Msg // cap 1, sent to under mu; closed: the consumer ended
}

func newPuller(js jetstream.JetStream) (*puller, error) {
	p := &puller{nc: js.Conn(), prefix: apiPrefix(js.Options()), waiting: map[uint64]*open{}, queue: map[string][]uint64{}}
	p.inbox = p.nc.NewInbox()
	sub, err := p.nc.Subscribe(p.inbox+".*", p.dispatch)
	if err != nil {
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// apiPrefix is the subject prefix of JetStream API requests, as the
// jetstream package derives it.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "" && !strings.HasSuffix(o.APIPrefix, "."):
		return o.APIPrefix + "."
	case o.APIPrefix != "":
		return o.APIPrefix
	}
	return jetstream.DefaultAPIPrefix
}

// close ends the subscription; every open request gets ErrClosed.
func (p *puller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	_ = p.sub.Unsubscribe()
	for n, o := range p.waiting {
		close(o.ch)
		delete(p.waiting, n)
	}
	clear(p.queue)
}

// drop ends request n's wait. p.mu is held.
func (p *puller) drop(n uint64) (*open, bool) {
	o, ok := p.waiting[n]
	if !ok {
		return nil, false
	}
	delete(p.waiting, n)
	q := p.queue[o.durable]
	if i := slices.Index(q, n); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(p.queue, o.durable)
	} else {
		p.queue[o.durable] = q
	}
	return o, true
}

var errPullerClosed = errors.New("natsbroker: consumer ended")

// request sends a pull for one message of the durable consumer to the
// stream's API, the server waiting up to wait for one (0: answering at
// once). The answer arrives on ch: a job of the route, or the status that
// ended the request. Call forget unless ch delivered.
func (p *puller) request(stream, durable string, wait time.Duration) (uint64, chan *nats.Msg, error) {
	ch := make(chan *nats.Msg, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, nil, errPullerClosed
	}
	p.n++
	n := p.n
	p.waiting[n] = &open{durable: durable, ch: ch}
	p.queue[durable] = append(p.queue[durable], n)
	p.mu.Unlock()
	subject := p.prefix + "CONSUMER.MSG.NEXT." + stream + "." + durable
	body := []byte(`{"batch":1,"no_wait":true}`)
	if wait > 0 {
		body = strconv.AppendInt([]byte(`{"batch":1,"expires":`), wait.Nanoseconds(), 10)
		body = append(body, '}')
	}
	if err := p.nc.PublishRequest(subject, p.inbox+"."+strconv.FormatUint(n, 10), body); err != nil {
		p.forget(n, ch)
		return 0, nil, err
	}
	return n, ch, nil
}

// forget drops request n: whatever arrives for it from now on is handed
// back. It returns the job that arrived before it forgot, if any (nil:
// none; the caller owns it).
func (p *puller) forget(n uint64, ch chan *nats.Msg) *nats.Msg {
	p.mu.Lock()
	p.drop(n)
	p.mu.Unlock()
	select {
	case m, ok := <-ch:
		if ok && isJob(m) {
			return m
		}
	default:
	}
	return nil
}

// isJob tells a delivery (it has an ack subject) from a status message.
func isJob(m *nats.Msg) bool { return m.Reply != "" }

// dispatch hands a message of the subscription to the request it answers:
// a status to the request on whose reply subject it came, a job to its
// route's oldest open request.
func (p *puller) dispatch(m *nats.Msg) {
	if !isJob(m) {
		if m.Header.Get("Status") == "100" {
			return // an idle heartbeat or flow control: we ask for neither
		}
		n, err := strconv.ParseUint(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], 10, 64)
		if err != nil {
			return
		}
		p.mu.Lock()
		if o, ok := p.drop(n); ok {
			o.ch <- m // cap 1, and only this send: never blocks
		}
		p.mu.Unlock()
		return
	}
	md, err := m.Metadata()
	if err != nil {
		return // not a JetStream delivery: nothing to hand back
	}
	p.mu.Lock()
	var o *open
	if q := p.queue[md.Consumer]; len(q) > 0 {
		o, _ = p.drop(q[0])
	}
	if o != nil {
		o.ch <- m
	}
	p.mu.Unlock()
	if o == nil {
		_ = m.Nak() // its Next gave up: hand it back (counts as a delivery)
	}
}

// pullStatus maps a status message that ended a request onto what pull
// does next: nil, the request expired or found nothing; else the cause
// (409: a leadership change, the consumer deleted, too many waiting
// requests; 503: no JetStream), after which pull backs off.
func pullStatus(m *nats.Msg) error {
	switch code := m.Header.Get("Status"); code {
	case "404", "408":
		return nil
	default:
		return errors.New("natsbroker: pull: " + code + " " + m.Header.Get("Description"))
	}
}
