package consumer

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// feed is what a Worker's slots pull jobs from: a broker consumer of the
// Mux's routes, built anew when the Mux's set of routes changes (Replace).
// The consumer it replaces gets no Next calls from then on and is closed
// once the jobs it handed out are settled: closing an Asynq consumer takes
// back, after its ShutdownTimeout, deliveries still unsettled, and a run
// must not lose its job because a tool next to it came or went.
type feed struct {
	w   *Worker
	mux *Mux
	ctx context.Context // Run's: consumers live at most as long

	// changed is closed at the Mux's next change after the state that
	// published and cur were made from.
	changed   <-chan struct{}
	published []string

	mu  sync.Mutex
	cur *generation
}

// generation is one consumer of one set of routes.
type generation struct {
	routes []broker.ToolRoute
	cons   broker.Consumer // nil while the Mux has no tools
	stop   context.CancelFunc
	// replaced ends when another generation takes this one's place; the
	// consumer is stopped once busy is back to 0 after that.
	replaced context.Context
	replace  context.CancelFunc
	busy     int // Next calls going on and deliveries not settled yet
}

// routes are the broker routes of mux's tools, sorted by tool.
func (w *Worker) routes(mux *Mux) []broker.ToolRoute {
	entries := mux.entries()
	routes := make([]broker.ToolRoute, 0, len(entries))
	for key, e := range entries {
		routes = append(routes, broker.ToolRoute{
			Tool: key, Lease: w.lease(e), MaxConcurrency: e.maxConcurrency,
			// Attempts are counted on the record (real handler starts):
			// the broker bounds no deliveries (see maxDeliveries).
			MaxDeliveries: w.maxDeliveries(e),
		})
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Tool < routes[j].Tool })
	return routes
}

// newFeed opens the consumer of mux's routes. Each tool is a route of its
// own: its jobs reach only workers that serve it, with its own lease,
// delivery bound and concurrency.
func (w *Worker) newFeed(ctx context.Context, mux *Mux) (*feed, error) {
	f := &feed{w: w, mux: mux, ctx: ctx}
	f.changed = mux.changes() // before reading the Mux: no change is missed
	f.published = keysOf(mux)
	g, err := f.open(w.routes(mux))
	if err != nil {
		return nil, err
	}
	f.cur = g
	return f, nil
}

func (f *feed) open(routes []broker.ToolRoute) (*generation, error) {
	g := &generation{routes: routes}
	g.replaced, g.replace = context.WithCancel(context.Background())
	if len(routes) == 0 {
		return g, nil
	}
	gctx, stop := context.WithCancel(f.ctx)
	cons, err := f.w.queue.Consumer(gctx, broker.ConsumerOptions{
		Tools: routes, Lease: f.w.cfg.Lease, Slots: f.w.cfg.Concurrency, Pool: f.w.cfg.Pool,
	})
	if err != nil {
		stop()
		return nil, err
	}
	g.cons, g.stop = cons, stop
	return g, nil
}

// next returns the next job and the function to call once it is settled.
func (f *feed) next(ctx context.Context) (broker.Delivery, func(), error) {
	for {
		f.mu.Lock()
		g := f.cur
		if g.cons != nil {
			g.busy++
		}
		f.mu.Unlock()
		if g.cons == nil {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-g.replaced.Done():
				continue
			}
		}
		nctx, cancel := context.WithCancel(ctx)
		unwatch := context.AfterFunc(g.replaced, cancel)
		d, err := g.cons.Next(nctx)
		unwatch()
		cancel()
		if err != nil {
			f.release(g)
			if ctx.Err() == nil && g.replaced.Err() != nil {
				continue // the routes changed: pull from the new consumer
			}
			return nil, nil, err
		}
		return d, func() { f.release(g) }, nil
	}
}

func (f *feed) release(g *generation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g.busy--
	g.stopIfDone()
}

// stopIfDone stops a replaced generation's consumer once it is idle. f.mu
// is held.
func (g *generation) stopIfDone() {
	if g.replaced.Err() != nil && g.busy == 0 && g.stop != nil {
		g.stop()
	}
}

// follow applies the Mux's changes until ctx ends: the catalog gets the new
// entries (and loses the gone ones) and, when the routes changed, the feed
// a consumer of the new routes. A consumer that cannot be opened (broker
// unreachable) is tried again, keeping the old one meanwhile.
func (f *feed) follow(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.changed:
		}
		f.changed = f.mux.changes()
		now := keysOf(f.mux)
		for !f.apply(ctx, f.published, now) {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		f.published = now
	}
}

// apply brings the consumer and then the catalog in line with the Mux;
// false if it has to be tried again. The consumer first: once the catalog
// shows a change, this worker pulls the jobs of the new set of routes.
func (f *feed) apply(ctx context.Context, published, now []string) bool {
	w := f.w
	routes := w.routes(f.mux)
	f.mu.Lock()
	same := slices.Equal(routes, f.cur.routes)
	f.mu.Unlock()
	if !same {
		g, err := f.open(routes)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn().Err(err).Msg("opening a consumer of the changed tools failed; keeping the old one")
			}
			return ctx.Err() != nil
		}
		f.mu.Lock()
		old := f.cur
		f.cur = g
		old.replace()
		old.stopIfDone()
		f.mu.Unlock()
		w.log.Info().Strs("tools", now).Msg("tools changed; pulling the jobs of the new set")
	}
	if err := w.publishTools(ctx, f.mux); err != nil && ctx.Err() == nil {
		w.log.Warn().Err(err).Msg("publishing the changed tools failed")
		return false
	}
	if w.catalog != nil {
		for _, k := range published {
			if slices.Contains(now, k) {
				continue
			}
			if err := w.catalog.RemoveTool(ctx, k); err != nil && !errors.Is(err, taskstate.ErrNotFound) && ctx.Err() == nil {
				w.log.Warn().Err(err).Str("tool", k).Msg("removing a gone tool from the catalog failed")
			}
		}
	}
	return true
}

func keysOf(m *Mux) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.keysLocked()
}
