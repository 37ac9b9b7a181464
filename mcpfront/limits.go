package mcpfront

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
	"golang.org/x/time/rate"
)

// Defaults of the request limits in Config.
const (
	// DefaultMaxArgs is Config.MaxArgs's default: arguments larger than a
	// job can carry go to a blob (taskstate.Blobs).
	DefaultMaxArgs = 16 << 20
	// DefaultMaxBody is Config.MaxBody's default: the largest arguments
	// and the request around them.
	DefaultMaxBody      = DefaultMaxArgs + 1<<20
	defaultMaxDepth     = 64
	defaultMaxInputKeys = 64
	// defaultMaxClientData is Config.MaxClientData's default.
	defaultMaxClientData = 64 << 10
	// DefaultResultMemory is Config.ResultMemory's default: room for four
	// results of the largest arguments a call may carry, read whole at once.
	DefaultResultMemory = 4 * DefaultMaxArgs
)

// checkSizes enforces MaxArgs and MaxInputKeys on the methods that carry
// arguments or answers.
func (s *Server) checkSizes(method string, info *bodyInfo) *rpcError {
	switch method {
	case "tools/call", "prompts/get", "tasks/update":
	default:
		return nil
	}
	if int64(info.argsLen()) > s.cfg.MaxArgs && method != "tasks/update" {
		return invalidParams(fmt.Sprintf("invalid params: the arguments are %d bytes, over the limit of %d bytes (--max-args)", info.argsLen(), s.cfg.MaxArgs))
	}
	if info.inputKeys() > s.cfg.MaxInputKeys {
		return invalidParams(fmt.Sprintf("invalid params: inputResponses has %d keys; at most %d are accepted", info.inputKeys(), s.cfg.MaxInputKeys))
	}
	return nil
}

// limiterCap bounds the principals whose buckets are kept. Past it, full
// (idle) buckets are dropped first, then arbitrary ones: a dropped principal
// starts again with a full burst.
const limiterCap = 1 << 16

// rateLimits holds one token bucket per principal.
type rateLimits struct {
	limit rate.Limit
	burst int
	idle  time.Duration // a bucket unused this long is full again
	every time.Duration // how often idle buckets are dropped

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newRateLimits(perSecond float64, burst int) *rateLimits {
	if perSecond <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &rateLimits{limit: rate.Limit(perSecond), burst: burst, idle: idle, every: max(idle, 10*time.Second), buckets: map[string]*bucket{}}
}

// take spends one token of key's bucket; when there is none it reports how
// long until there is.
func (l *rateLimits) take(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.every || len(l.buckets) >= limiterCap {
		l.sweep(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep drops the buckets that are full again (they behave as new ones), and
// arbitrary ones while the map is at its cap.
func (l *rateLimits) sweep(now time.Time) {
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.used) >= l.idle {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < limiterCap*3/4 {
			break
		}
		delete(l.buckets, k)
	}
}

// size is the number of buckets kept (for tests).
func (l *rateLimits) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// limitKey is who a request counts against: the authenticated principal, or
// the remote address without port for an anonymous request.
func limitKey(r *http.Request) string {
	if o := principalOf(r.Context()).Owner(); o != "" {
		return "principal:" + o
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// overloaded is the message of a request refused by its principal's rate
// limit (Config.RateLimit): "overloaded, retry after N s", N the seconds
// until the principal's bucket has a token again, as in the Retry-After
// header.
func overloaded(secs int64) string { return fmt.Sprintf("overloaded, retry after %d s", secs) }

// rateLimited answers a request over its principal's rate with 429 and
// reports true: Retry-After and the message say when a request is
// accepted again (the body is not read, so the error's id is null, on
// either protocol era).
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request) bool {
	if s.rates == nil {
		return false
	}
	wait, ok := s.rates.take(limitKey(r), s.cfg.Now())
	if ok {
		return false
	}
	// The same N in the header and the message: whole seconds, rounded
	// up, at least 1 (Retry-After has no fractions).
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, nil, errorf(vocab.CodeLimited, http.StatusTooManyRequests, overloaded(secs)).
		withData(map[string]any{"retryAfterMs": wait.Milliseconds(), "retryAfterSeconds": secs}))
	return true
}

// activeTaskPage is how many records one List call reads while counting.
const activeTaskPage = 256

// admitTask refuses a new task for owner when it already has MaxActiveTasks
// that have not ended. Tasks without an owner are not counted (the store
// cannot list them). Concurrent requests can pass the check together: the
// cap is approximate by up to the concurrency of one owner. A store that
// counts active tasks itself (taskstate.ActiveCounter) is asked; another is
// counted by listing the owner's tasks, finished ones included.
func (s *Server) admitTask(ctx context.Context, owner string) *rpcError {
	if s.cfg.MaxActiveTasks <= 0 || owner == "" {
		return nil
	}
	n, err := s.countActive(ctx, owner)
	if err != nil {
		return s.internal("counting active tasks", err)
	}
	if n >= s.cfg.MaxActiveTasks {
		return errorf(vocab.CodeLimited, http.StatusOK, fmt.Sprintf("too many active tasks: at most %d may run at once; wait for one to end or cancel one", s.cfg.MaxActiveTasks)).
			withData(map[string]any{"maxActiveTasks": s.cfg.MaxActiveTasks})
	}
	return nil
}

// countActive counts owner's active tasks up to MaxActiveTasks.
func (s *Server) countActive(ctx context.Context, owner string) (int, error) {
	if c, ok := s.store.(taskstate.ActiveCounter); ok {
		return c.CountActive(ctx, owner, s.cfg.MaxActiveTasks)
	}
	n, cursor := 0, ""
	for {
		tasks, next, err := s.store.List(ctx, owner, cursor, activeTaskPage)
		if err != nil {
			return 0, err
		}
		for _, t := range tasks {
			if !t.Status.Terminal() {
				n++
			}
		}
		if n >= s.cfg.MaxActiveTasks || next == "" {
			return n, nil
		}
		cursor = next
	}
}

// refuseTask writes admitTask's refusal and reports whether it did.
func (s *Server) refuseTask(ctx context.Context, w http.ResponseWriter, id []byte, owner string) bool {
	if rerr := s.admitTask(ctx, owner); rerr != nil {
		writeError(w, id, rerr)
		return true
	}
	return false
}
