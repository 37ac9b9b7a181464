package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/cli"
)

// parseHandover registers the hand-over flags on a fresh set, parses args
// and resolves --handle-after, returning it, --mirror-tools, the log and the
// parse error.
func parseHandover(t *testing.T, args ...string) (time.Duration, string, string, error) {
	t.Helper()
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var h handoverFlags
	h.flags(fs)
	if err := cli.ParseFlags(fs, args, io.Discard); err != nil {
		return 0, "", "", err
	}
	var logs bytes.Buffer
	d := h.resolve(fs, zerolog.New(&logs))
	return d, h.mirrorTools, logs.String(), nil
}

func TestHandleAfterAndItsDeprecatedAlias(t *testing.T) {
	for _, c := range []struct {
		name       string
		env        map[string]string
		args       []string
		want       time.Duration
		deprecated bool
	}{
		{name: "default", want: 30 * time.Second},
		{name: "--handle-after", args: []string{"--handle-after", "2s"}, want: 2 * time.Second},
		{name: "MCPQ_HANDLE_AFTER", env: map[string]string{"MCPQ_HANDLE_AFTER": "3s"}, want: 3 * time.Second},
		{name: "--sync-timeout (deprecated)", args: []string{"--sync-timeout", "15m"}, want: 15 * time.Minute, deprecated: true},
		{name: "MCPQ_SYNC_TIMEOUT (deprecated)", env: map[string]string{"MCPQ_SYNC_TIMEOUT": "4s"}, want: 4 * time.Second, deprecated: true},
		{name: "both: the new name wins", args: []string{"--sync-timeout", "15m", "--handle-after", "5s"}, want: 5 * time.Second, deprecated: true},
		{name: "old variable, new flag", env: map[string]string{"MCPQ_SYNC_TIMEOUT": "4s"}, args: []string{"--handle-after", "6s"}, want: 6 * time.Second, deprecated: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MCPQ_HANDLE_AFTER", "")
			t.Setenv("MCPQ_SYNC_TIMEOUT", "")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			got, mirror, logs, err := parseHandover(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || mirror != "auto" {
				t.Errorf("handle-after %s, mirror-tools %q; want %s, auto", got, mirror, c.want)
			}
			if warned := strings.Contains(logs, "deprecated"); warned != c.deprecated {
				t.Errorf("deprecation warning %v, want %v; logs: %s", warned, c.deprecated, logs)
			}
		})
	}
}

func TestMirrorToolsFlag(t *testing.T) {
	t.Setenv("MCPQ_MIRROR_TOOLS", "")
	if _, m, _, err := parseHandover(t, "--mirror-tools", "off"); err != nil || m != "off" {
		t.Fatalf("--mirror-tools off: %q, %v", m, err)
	}
	_, _, _, err := parseHandover(t, "--mirror-tools", "on")
	if err == nil || !strings.Contains(err.Error(), `--mirror-tools "on"`) || !strings.Contains(err.Error(), "auto, off") {
		t.Fatalf("--mirror-tools on: want an error naming the flag and the choices, got %v", err)
	}
	t.Setenv("MCPQ_MIRROR_TOOLS", "never")
	_, _, _, err = parseHandover(t)
	if err == nil || !strings.Contains(err.Error(), `MCPQ_MIRROR_TOOLS="never"`) {
		t.Fatalf("MCPQ_MIRROR_TOOLS=never: want an error naming the variable, got %v", err)
	}
}
