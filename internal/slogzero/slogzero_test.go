package slogzero_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/slogzero"
)

// A zerolog line reaches the slog handler as one record: its level, its
// message and its fields; the handler's level filters it.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	s := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log := slogzero.Logger(zerolog.Nop(), s)
	log.Debug().Msg("hidden")
	log.Warn().Str("task", "t1").Int("attempt", 2).Msg("lease lost")
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="lease lost"`, "task=t1", "attempt=2"} {
		if !strings.Contains(got, want) {
			t.Errorf("slog got %q; want it to hold %q", got, want)
		}
	}
	if strings.Contains(got, "hidden") || strings.Count(got, "\n") != 1 {
		t.Errorf("slog got %q; want the one warning only", got)
	}
	z := zerolog.New(&buf)
	if l := slogzero.Logger(z, nil); l.GetLevel() != z.GetLevel() {
		t.Error("Logger(z, nil) is not z")
	}
}
