package main

import (
	"flag"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/cli"
)

// handoverFlags are the settings of inline calls from clients without
// tasks: --handle-after (formerly --sync-timeout, which cancelled the call
// where it now hands it over) and --mirror-tools.
type handoverFlags struct {
	handleAfter time.Duration
	syncTimeout time.Duration // deprecated alias of handleAfter
	mirrorTools string
}

func (h *handoverFlags) flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.Duration(&h.handleAfter, "handle-after", "MCPQ_HANDLE_AFTER", 30*time.Second, "how long a tool call whose client waits inline (no tasks negotiated) waits for its result; past it the client gets the task handle (structuredContent {taskId, status, pollAfterMs}) and the call runs on; a call that cannot be handed over (prompts/get, resources/read, completion/complete; tool calls with --mirror-tools off) is cancelled past it")
	e.Duration(&h.syncTimeout, "sync-timeout", "MCPQ_SYNC_TIMEOUT", 0, "deprecated: the old name of --handle-after (past it a call was cancelled; it is now handed over)")
	e.Choice(&h.mirrorTools, "mirror-tools", "MCPQ_MIRROR_TOOLS", "auto", "auto: list the tools tasks_result and tasks_cancel to clients that did not negotiate tasks, so they can follow a handed-over call; off: never (their calls are then cancelled past --handle-after)", "auto", "off")
}

// resolve returns --handle-after, taking the deprecated --sync-timeout (or
// MCPQ_SYNC_TIMEOUT) when only the old name is set, and warns about the old
// name either way.
func (h *handoverFlags) resolve(fs *flag.FlagSet, log zerolog.Logger) time.Duration {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	oldSet := set["sync-timeout"] || os.Getenv("MCPQ_SYNC_TIMEOUT") != ""
	newSet := set["handle-after"] || os.Getenv("MCPQ_HANDLE_AFTER") != ""
	switch {
	case !oldSet:
		return h.handleAfter
	case newSet:
		log.Warn().Msg("--sync-timeout (MCPQ_SYNC_TIMEOUT) is deprecated and ignored: --handle-after (MCPQ_HANDLE_AFTER) is set")
		return h.handleAfter
	}
	log.Warn().Dur("handle_after", h.syncTimeout).Msg("--sync-timeout (MCPQ_SYNC_TIMEOUT) is deprecated: use --handle-after (MCPQ_HANDLE_AFTER); past it a call is now handed over to its client as a task, not cancelled")
	return h.syncTimeout
}
