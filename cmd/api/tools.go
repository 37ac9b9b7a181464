package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

const toolsUsage = `usage: api tools <command> [flags] [names]

The tool catalog, on the backend api runs on (the same flags and
environment as api tasks). An entry outlives its workers for
--tool-retention, so a pool scaled to zero keeps its tools callable.

commands:
  list          every entry: name, whether a worker serves it now, until
                when, task support; --json prints one entry per line
  rm NAME...    remove entries (prompt/<name> for a prompt): the tool is no
                longer listed and calls get "Unknown tool", until a worker
                publishes it again

Exit status: 0 done, 1 a name not found or a backend error, 2 a usage error.
`

// toolsMain runs `api tools args…` and returns the exit status.
func toolsMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitStatus("api tools", runTools(ctx, args, stdout, stderr), stderr)
}

func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &tasksCLI{stdout: stdout, stderr: stderr}
	cmd, fs, names, err := c.parseCommand("api tools", toolsUsage, args, func(cmd string, fs *flag.FlagSet) (string, error) {
		switch cmd {
		case "list":
			fs.BoolVar(&c.asJSON, "json", false, "print each entry as one line of JSON instead of a table")
			return "", nil
		case "rm":
			return " NAME...", nil
		default:
			return "", usageError(fmt.Sprintf("unknown command %q (list, rm)", cmd))
		}
	})
	switch {
	case err != nil:
		return err
	case cmd == "rm" && len(names) == 0:
		return usageError("rm needs the names of the entries to remove")
	case cmd == "list" && len(names) > 0:
		return usageError(fmt.Sprintf("list takes no names, got %q", names))
	}
	b, err := c.connect(ctx, fs, "api-tools")
	if err != nil {
		return err
	}
	defer b.Close()
	if cmd == "list" {
		return listTools(ctx, b, c.asJSON, stdout)
	}
	missing := false
	for _, n := range names {
		switch err := b.Catalog.RemoveTool(ctx, n); {
		case errors.Is(err, taskstate.ErrNotFound):
			fmt.Fprintf(stdout, "%s\tnot found\n", n)
			missing = true
		case err != nil:
			return err
		default:
			fmt.Fprintf(stdout, "%s\tremoved\n", n)
		}
	}
	if missing {
		return errReported
	}
	return nil
}

func listTools(ctx context.Context, b *backend.Backend, asJSON bool, stdout io.Writer) error {
	tools, err := b.Catalog.Tools(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, t := range tools {
			if err := enc.Encode(t); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLIVE\tLIVE UNTIL\tTASKS")
	for _, t := range tools {
		live, until := "no", "-"
		if t.Live(now) {
			live = "yes"
		}
		if !t.LiveUntil.IsZero() {
			until = t.LiveUntil.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Key(), live, until, t.TaskSupport)
	}
	return tw.Flush()
}
