package helmtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
)

// The naming contract of the queues is owned by the broker packages (the
// names api and workers use); the chart must compute the same:
//
//   - the job stream is <P>_JOBS, P the prefix upper-cased;
//   - tool t's durable pull consumer is tool_<token(t)>: token(t) is t when t
//     only has [A-Za-z0-9_-], else t with every other character replaced by
//     "_", then "_" and the first 8 hex digits of sha256(t);
//   - pool p's Asynq queue is <prefix>.pool.<p>, its pending list
//     asynq:{<prefix>.pool.<p>}:pending.

func toolToken(t string) string { return natsbroker.Token(t) }

func streamName(prefix string) string { return natsbroker.NamesFor(prefix).Stream }

func consumerName(tool string) string { return natsbroker.ConsumerName(tool) }

func asynqPendingList(prefix, pool string) string {
	return "asynq:{" + asynqbroker.PoolQueueName(prefix, pool) + "}:pending"
}

// The chart's mcpqueue.toolToken helper, rendered by Helm, gives the token
// the contract gives, for plain names and for names that need the hash.
func TestToolTokenHelper(t *testing.T) {
	names := []string{
		"render_report", "noop", "Build-Thing_2", "pdf.render", "pdf_render", "a b", "report:weekly",
		"ünïcode", "日本語", "x/y.z", "-", "tool.with.many.dots.and-more",
	}
	ch := loadChart(t)
	ch.Templates = append(ch.Templates, &chart.File{
		Name: "templates/tokens.txt",
		Data: []byte(`{{ range .Values.tokenProbe }}{{ dict "tool" . "token" (include "mcpqueue.toolToken" .) "consumer" (include "mcpqueue.consumer" (dict "tool" .)) | toJson }}` + "\n{{ end }}"),
	})
	out := renderFiles(t, ch, map[string]any{"tokenProbe": names, "api": map[string]any{"auth": map[string]any{"disabled": true}}})["mcpqueue/templates/tokens.txt"]
	got := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row struct{ Tool, Token, Consumer string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[row.Tool] = [2]string{row.Token, row.Consumer}
	}
	for _, n := range names {
		if want := toolToken(n); got[n][0] != want {
			t.Errorf("token(%q): chart %q, contract %q", n, got[n][0], want)
		}
		if want := consumerName(n); got[n][1] != want {
			t.Errorf("consumer(%q): chart %q, contract %q", n, got[n][1], want)
		}
	}
	// The contract itself, on examples worked by hand.
	for in, want := range map[string]string{
		"render_report": "render_report",
		"pdf.render":    "pdf_render_" + hex.EncodeToString(sha("pdf.render"))[:8],
		"日本語":           "____" + hex.EncodeToString(sha("日本語"))[:8], // three code points, then the hash
	} {
		if got := toolToken(in); got != want {
			t.Errorf("toolToken(%q) = %q, want %q", in, got, want)
		}
	}
	if streamName("mcpq") != "MCPQ_JOBS" {
		t.Errorf("stream of prefix mcpq: %s", streamName("mcpq"))
	}
}

func sha(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}
