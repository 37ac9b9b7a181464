package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

const schedulesUsage = `usage: api schedules <command> [flags] [names]

Recurring schedules (issue #32 item 5), kept in the store api runs on (the
same flags and environment as api tasks). Every api replica fires them:
each firing creates one task of the schedule's tool for its owner, once
across replicas. Times are UTC.

commands:
  add           add or replace a schedule: --name, --tool, --cron, and
                --args (a JSON object), --owner (the owner key of the
                tasks: issuer|subject[|tenant], as api tasks list shows it)
  list          every schedule and its next firing; --json: one per line
  rm NAME...    remove schedules; tasks already created run on

--cron takes standard cron (5 fields: minute hour day-of-month month
day-of-week), 6 fields with seconds first, or @hourly, @daily, @every 30s, …

Exit status: 0 done, 1 a name not found or a backend error, 2 a usage error.
`

// scheduleFlags are the flags of api schedules add.
type scheduleFlags struct {
	name, tool, args, cron, owner string
}

// schedules runs `api schedules args…` (operatorMain).
func (c *tasksCLI) schedules(ctx context.Context, args []string) error {
	var f scheduleFlags
	cmd, fs, names, err := c.parseCommand("api schedules", schedulesUsage, args, func(cmd string, fs *flag.FlagSet) (string, error) {
		switch cmd {
		case "add":
			fs.StringVar(&f.name, "name", "", "the schedule's name: letters, digits, _ and -")
			fs.StringVar(&f.tool, "tool", "", "the tool to call")
			fs.StringVar(&f.args, "args", "", "the call's arguments, a JSON object")
			fs.StringVar(&f.cron, "cron", "", "when it fires (UTC): 5-field cron, 6 with seconds, or @every 30s")
			fs.StringVar(&f.owner, "owner", "", "the owner key of the tasks it creates")
		case "list":
			fs.BoolVar(&c.asJSON, "json", false, "print each schedule as one line of JSON instead of a table")
		case "rm":
			return " NAME...", nil
		default:
			return "", usageError(fmt.Sprintf("unknown command %q (add, list, rm)", cmd))
		}
		return "", nil
	})
	switch {
	case err != nil:
		return err
	case cmd == "rm" && len(names) == 0:
		return usageError("rm needs the names of the schedules to remove")
	case cmd != "rm" && len(names) > 0:
		return usageError(fmt.Sprintf("%s takes no names, got %q", cmd, names))
	}
	var sc *taskstate.Schedule
	if cmd == "add" {
		if sc, err = f.schedule(); err != nil {
			return err
		}
	}
	b, err := c.connect(ctx, fs, "api-schedules")
	if err != nil {
		return err
	}
	defer b.Close()
	store, ok := b.Store.(taskstate.Schedules)
	if !ok {
		return fmt.Errorf("the store (%T) keeps no schedules", b.Store)
	}
	switch cmd {
	case "add":
		if err := store.PutSchedule(ctx, sc); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s\tadded\n", sc.Name)
		return nil
	case "list":
		return listSchedules(ctx, store, c.asJSON, c.stdout)
	}
	return removeSchedules(ctx, store, names, c.stdout)
}

// schedule is the schedule add's flags describe; a usage error says what
// is wrong with them.
func (f *scheduleFlags) schedule() (*taskstate.Schedule, error) {
	if _, err := producer.ParseCron(f.cron); err != nil {
		return nil, usageError("--cron: " + err.Error())
	}
	sc := &taskstate.Schedule{Name: f.name, Tool: f.tool, Cron: f.cron, Owner: f.owner, CreatedAt: time.Now().UTC()}
	if f.args != "" {
		sc.Arguments = json.RawMessage(f.args)
	}
	if err := taskstate.CheckSchedule(sc); err != nil {
		return nil, usageError(err.Error())
	}
	return sc, nil
}

func removeSchedules(ctx context.Context, store taskstate.Schedules, names []string, stdout io.Writer) error {
	missing := false
	for _, n := range names {
		switch err := store.DeleteSchedule(ctx, n); {
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

func listSchedules(ctx context.Context, store taskstate.Schedules, asJSON bool, stdout io.Writer) error {
	all, err := store.ListSchedules(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return jsonLines(stdout, all)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTOOL\tCRON\tOWNER\tNEXT")
	for _, s := range all {
		next := "(bad cron expression)"
		if c, err := producer.ParseCron(s.Cron); err == nil {
			next = c.Next(now).Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Tool, s.Cron, s.Owner, next)
	}
	return tw.Flush()
}
