package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Check is one readiness condition: Fn returns nil when it holds.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Healthz answers 200 "ok" while the process serves HTTP at all (liveness).
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Readyz answers 200 "ready" when every check passes within timeout, and
// 503 with one line per failing check otherwise. Checks run concurrently on
// each request, so a slow broker costs one timeout, not one per check.
func Readyz(timeout time.Duration, checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, c := range checks {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = c.Fn(ctx) }()
		}
		wg.Wait()
		var bad []string
		for i, err := range errs {
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", checks[i].Name, err))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready\n" + strings.Join(bad, "\n") + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}
