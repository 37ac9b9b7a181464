// Package slogzero lets the public configurations take a *slog.Logger where
// they take a zerolog.Logger: Logger returns a zerolog.Logger whose lines go
// to a slog handler, so the packages keep logging through zerolog (what the
// binaries write) and a user's program gets its records in slog.
package slogzero

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/rs/zerolog"
)

// Logger is s, as a zerolog.Logger, when s is not nil; z otherwise.
func Logger(z zerolog.Logger, s *slog.Logger) zerolog.Logger {
	if s == nil {
		return z
	}
	return zerolog.New(writer{s.Handler()}).Level(zerolog.TraceLevel)
}

// writer turns the JSON lines of a zerolog.Logger into slog records.
type writer struct{ h slog.Handler }

func (w writer) Write(p []byte) (int, error) {
	return w.WriteLevel(zerolog.NoLevel, p)
}

// WriteLevel makes one record of the line p at level: its message, its
// time and every other field as an attribute.
func (w writer) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	lvl := slogLevel(level)
	ctx := context.Background()
	if !w.h.Enabled(ctx, lvl) {
		return len(p), nil
	}
	fields := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	if err := d.Decode(&fields); err != nil {
		r := slog.NewRecord(time.Now(), lvl, string(bytes.TrimSpace(p)), 0)
		return len(p), w.h.Handle(ctx, r)
	}
	msg, _ := fields[zerolog.MessageFieldName].(string)
	when := time.Now()
	if ts, ok := fields[zerolog.TimestampFieldName].(string); ok {
		if t, err := time.Parse(zerolog.TimeFieldFormat, ts); err == nil {
			when = t
		}
	}
	for _, k := range []string{zerolog.MessageFieldName, zerolog.TimestampFieldName, zerolog.LevelFieldName} {
		delete(fields, k)
	}
	r := slog.NewRecord(when, lvl, msg, 0)
	for k, v := range fields {
		r.AddAttrs(slog.Any(k, v))
	}
	return len(p), w.h.Handle(ctx, r)
}

func slogLevel(l zerolog.Level) slog.Level {
	switch l {
	case zerolog.TraceLevel, zerolog.DebugLevel:
		return slog.LevelDebug
	case zerolog.WarnLevel:
		return slog.LevelWarn
	case zerolog.ErrorLevel, zerolog.FatalLevel, zerolog.PanicLevel:
		return slog.LevelError
	}
	return slog.LevelInfo
}
