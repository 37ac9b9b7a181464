package worker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/cli"
)

// rateFlag registers --tool-rate-limit (feature: rate limits per tool).
func (w *Options) rateFlag(e *cli.Env) {
	e.List(&w.rateLimits, "tool-rate-limit", "MCPQ_TOOL_RATE_LIMIT", "rate limits of tools, comma-separated TOOL=N/INTERVAL (e.g. geocode=5/1s,search=100/1m; prompt/<name> for a prompt): at most N starts of the tool in any INTERVAL across every worker on the backend, over the limit the tool sets; jobs over it wait queued, the task's statusMessage saying so; for relayed tools (--mcp-stdio, --mcp-url, --mcp-config) use their relayed names")
}

// checkRates parses --tool-rate-limit into Config.RateLimits.
func (w *Options) checkRates() error {
	for _, spec := range w.rateLimits {
		key, r, err := parseRateLimit(spec)
		if err != nil {
			return fmt.Errorf("worker: --tool-rate-limit: %w", err)
		}
		if w.RateLimits == nil {
			w.RateLimits = map[string]consumer.Rate{}
		}
		w.RateLimits[key] = r
	}
	return nil
}

// parseRateLimit reads one --tool-rate-limit entry, TOOL=N/INTERVAL ("geocode=5/1s"):
// the tool's catalog key and its rate.
func parseRateLimit(spec string) (key string, r consumer.Rate, err error) {
	key, rate, ok := strings.Cut(spec, "=")
	n, per, ok2 := strings.Cut(rate, "/")
	if !ok || !ok2 || key == "" {
		return "", r, fmt.Errorf("%q: want TOOL=N/INTERVAL, e.g. geocode=5/1s", spec)
	}
	if r.N, err = strconv.Atoi(n); err != nil {
		return "", r, fmt.Errorf("%q: %q is not a number of starts", spec, n)
	}
	if r.Per, err = time.ParseDuration(per); err != nil {
		return "", r, fmt.Errorf("%q: %q is not an interval (1s, 1m, 500ms)", spec, per)
	}
	if err := r.Check(); err != nil {
		return "", r, fmt.Errorf("%q: %w", spec, err)
	}
	return key, r, nil
}
