package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

// tools runs `api tools args…` (operatorMain).
func (c *tasksCLI) tools(ctx context.Context, args []string) error {
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
		return listTools(ctx, b, c.asJSON, c.stdout)
	}
	missing := false
	for _, n := range names {
		switch err := b.Catalog.RemoveTool(ctx, n); {
		case errors.Is(err, taskstate.ErrNotFound):
			fmt.Fprintf(c.stdout, "%s\tnot found\n", n)
			missing = true
		case err != nil:
			return err
		default:
			fmt.Fprintf(c.stdout, "%s\tremoved\n", n)
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
		return jsonLines(stdout, tools)
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
