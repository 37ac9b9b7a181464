package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

const tasksUsage = `usage: api tasks <command> [flags] [ids]

Operator commands on the task records, against the backend api runs on:
the same flags and environment (--broker, --nats, --redis, --prefix, …).
With --broker nats and no --nats, the all-in-one api's NATS at
nats://127.0.0.1:4250, with its key in --data-dir (default ./data): run
from the api's directory, or pass --data-dir or --nats-nkey.

commands:
  list          records, newest first: --status, --tool, --owner, --older-than,
                --active, --dead, --limit, --json (one record per line)
  get ID        one record as indented JSON
  cancel ID...  cancel tasks as tasks/cancel does: record, then broadcast
  replay ID...  run an ended task's call again as a new task of the same
                owner, linked both ways (io.mcpqueue/replay-of, replayed-by)
  purge         delete terminal records before their TTL: --status, --tool,
                --owner, --older-than, or --all; --dry-run counts only

"api tasks <command> -h" lists a command's flags. Exit status: 0 done,
1 a task not found or a backend error, 2 a usage error.
`

// cancelReason is what a task cancelled from the CLI says.
const cancelReason = "cancelled by an operator (api tasks cancel)"

// usageError is bad input on the command line: exit status 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// tasksCLI is one `api tasks` run.
type tasksCLI struct {
	opts           cli.Options
	timeout        time.Duration
	stdout, stderr io.Writer
	log            zerolog.Logger

	// Filters of list and purge.
	status    string
	statuses  []taskstate.Status
	tool      string
	owner     string
	olderThan time.Duration
	active    bool
	dead      bool // list --dead: dead letters only (replay.go)
	limit     int
	asJSON    bool
	all       bool
	dryRun    bool
}

// operatorMain runs `api tasks args…` or, command "tools", `api tools
// args…` (tools.go), until it ends or SIGINT/SIGTERM, and returns the exit
// status.
func operatorMain(command string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &tasksCLI{stdout: stdout, stderr: stderr}
	run := c.run
	switch command {
	case "tools":
		run = c.tools
	case "schedules": // schedules.go
		run = c.schedules
	}
	return exitStatus("api "+command, run(ctx, args), stderr)
}

// exitStatus reports err of an operator command named cmd and returns the
// exit status: 0 done (or help), 2 a usage error, 1 anything else.
func exitStatus(cmd string, err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, cli.ErrConfigPrinted):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\n(%s -h for help)\n", cmd, err, cmd)
		return 2
	case errors.Is(err, errReported):
		return 1
	default:
		fmt.Fprintf(stderr, "%s: %s\n", cmd, err)
		return 1
	}
}

// errReported: the failure was already printed per task.
var errReported = errors.New("reported")

func (c *tasksCLI) run(ctx context.Context, args []string) error {
	cmd, fs, pos, err := c.parseCommand("api tasks", tasksUsage, args, func(cmd string, fs *flag.FlagSet) (string, error) {
		switch cmd {
		case "list":
			c.filterFlags(fs)
			fs.BoolVar(&c.active, "active", false, "only tasks not yet ended (working, input_required)")
			fs.BoolVar(&c.dead, "dead", false, "only dead letters: tasks failed after their last attempt (worker lost on it, retries used up); replay them with api tasks replay")
			fs.IntVar(&c.limit, "limit", 0, "show at most this many (the newest); 0: all")
			fs.BoolVar(&c.asJSON, "json", false, "print each record as one line of JSON instead of a table")
		case "purge":
			c.filterFlags(fs)
			fs.BoolVar(&c.all, "all", false, "purge every terminal record (required when no filter is given)")
			fs.BoolVar(&c.dryRun, "dry-run", false, "count what would be purged, delete nothing")
		case "get":
			return " ID", nil
		case "cancel", "replay":
			return " ID...", nil
		default:
			return "", usageError(fmt.Sprintf("unknown command %q (list, get, cancel, replay, purge)", cmd))
		}
		return "", nil
	})
	if err != nil {
		return err
	}
	if err := c.check(cmd, pos); err != nil {
		return err
	}
	b, err := c.connect(ctx, fs, "api-tasks")
	if err != nil {
		return err
	}
	defer b.Close()
	switch cmd {
	case "list":
		return c.list(ctx, b)
	case "get":
		return c.get(ctx, b, pos[0])
	case "cancel":
		return c.cancel(ctx, b, pos)
	case "replay":
		return c.replay(ctx, b, pos) // replay.go
	default:
		return c.purge(ctx, b)
	}
}

// parseCommand reads the command line of an operator command prog (api
// tasks, api tools): with no command or a help request it prints usage;
// otherwise it gives cmd a flag set with the backend's flags, --timeout and
// the ones commandFlags adds (which also names what cmd takes after its
// flags, for its usage line, or refuses cmd), and parses the rest of args
// into it, flags and positional arguments in any order. -h after cmd
// prints cmd's flags.
func (c *tasksCLI) parseCommand(prog, usage string, args []string, commandFlags func(cmd string, fs *flag.FlagSet) (operands string, err error)) (cmd string, fs *flag.FlagSet, pos []string, err error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stderr, usage)
		if len(args) == 0 {
			return "", nil, nil, usageError("no command given")
		}
		return "", nil, nil, flag.ErrHelp
	}
	cmd, args = args[0], args[1:]
	fs = flag.NewFlagSet(prog+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by exitStatus; -h prints the flags
	fs.Usage = func() {}
	c.opts.Flags(fs)
	fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "how long to wait for the backend to answer the connection")
	operands, err := commandFlags(cmd, fs)
	if err != nil {
		return "", nil, nil, err
	}
	pos, err = parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(c.stderr, "usage: %s %s [flags]%s\n\nflags:\n", prog, cmd, operands)
		fs.SetOutput(c.stderr)
		fs.PrintDefaults()
		return "", nil, nil, err
	}
	if err != nil {
		return "", nil, nil, usageError(err.Error())
	}
	return cmd, fs, pos, nil
}

// connect connects the backend the parsed flags of fs name.
func (c *tasksCLI) connect(ctx context.Context, fs *flag.FlagSet, name string) (*backend.Backend, error) {
	if err := cli.CheckFlags(fs, c.stdout); err != nil {
		if errors.Is(err, cli.ErrConfigPrinted) {
			return nil, err
		}
		return nil, usageError(err.Error())
	}
	explicitLevel := os.Getenv("MCPQ_LOG_LEVEL") != ""
	fs.Visit(func(f *flag.Flag) { explicitLevel = explicitLevel || f.Name == "log-level" })
	if !explicitLevel {
		c.opts.LogLevel = "warn" // the connection's progress is noise here
	}
	c.log = c.opts.Logger(name)
	if (c.opts.Broker == "nats" || c.opts.Broker == "") && c.opts.NATS.URL == "" {
		c.opts.NATS.URL = "nats://127.0.0.1:4250" // the all-in-one api's --nats-listen default
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, err := c.opts.Connect(cctx, name, c.log)
	if err != nil {
		return nil, fmt.Errorf("cannot use the %s backend (%s) within %s: %w", c.opts.Broker, c.backendURL(), c.timeout, err)
	}
	return b, nil
}

func (c *tasksCLI) backendURL() string {
	if c.opts.IsRedis() {
		return c.opts.Redis.URL
	}
	return c.opts.NATS.URL
}

func (c *tasksCLI) filterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.status, "status", "", "only these statuses, comma-separated: working, input_required, completed, failed, cancelled")
	fs.StringVar(&c.tool, "tool", "", "only tasks of this tool")
	fs.StringVar(&c.owner, "owner", "", "only tasks of this owner (the principal, as stored)")
	fs.DurationVar(&c.olderThan, "older-than", 0, "only tasks last updated longer ago than this, e.g. 24h (a terminal task's last update is its end)")
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments (api tasks cancel ID --nats URL), returning the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// check validates the command line before anything connects.
func (c *tasksCLI) check(cmd string, pos []string) error {
	switch {
	case cmd == "get" && len(pos) != 1:
		return usageError("get takes exactly one task id")
	case (cmd == "cancel" || cmd == "replay") && len(pos) == 0:
		return usageError(cmd + " takes one or more task ids")
	case c.dead && c.active:
		return usageError("--dead lists ended tasks, --active those not yet ended: give one")
	case (cmd == "list" || cmd == "purge") && len(pos) > 0:
		return usageError(fmt.Sprintf("%s takes no arguments, got %q (filters are flags: --status, --tool, --owner)", cmd, pos[0]))
	case c.olderThan < 0:
		return usageError(fmt.Sprintf("--older-than %s: want a positive duration", c.olderThan))
	case c.limit < 0:
		return usageError(fmt.Sprintf("--limit %d: want 0 (all) or more", c.limit))
	}
	for _, s := range cli.SplitList(c.status) {
		st := taskstate.Status(s)
		if !st.Valid() {
			return usageError(fmt.Sprintf("--status: unknown status %q (working, input_required, completed, failed, cancelled)", s))
		}
		if cmd == "purge" && !st.Terminal() {
			return usageError(fmt.Sprintf("--status %s: purge deletes only ended tasks (completed, failed, cancelled); cancel an active one first", s))
		}
		if c.active && st.Terminal() {
			return usageError(fmt.Sprintf("--active lists tasks not yet ended, and --status %s has ended", s))
		}
		c.statuses = append(c.statuses, st)
	}
	if cmd == "purge" && !c.all && c.status == "" && c.tool == "" && c.owner == "" && c.olderThan == 0 {
		return usageError("purge needs a filter (--status, --tool, --owner, --older-than) or --all")
	}
	return nil
}

// match applies the filters.
func (c *tasksCLI) match(t *taskstate.Task, now time.Time) bool {
	return (len(c.statuses) == 0 || slices.Contains(c.statuses, t.Status)) &&
		(c.tool == "" || t.Tool == c.tool) &&
		(c.owner == "" || t.Owner == c.owner) &&
		(!c.dead || t.Dead(0)) &&
		(c.olderThan == 0 || now.Sub(t.LastUpdatedAt) > c.olderThan)
}

// scan returns the records that match, newest first.
func (c *tasksCLI) scan(ctx context.Context, b *backend.Backend, active bool) ([]*taskstate.Task, error) {
	now := time.Now()
	var out []*taskstate.Task
	err := b.Store.Scan(ctx, active, func(t *taskstate.Task) bool {
		if (!active || !t.Status.Terminal()) && c.match(t, now) {
			out = append(out, t)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *taskstate.Task) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, err
}

func (c *tasksCLI) list(ctx context.Context, b *backend.Backend) error {
	tasks, err := c.scan(ctx, b, c.active)
	if err != nil {
		return err
	}
	if c.limit > 0 && len(tasks) > c.limit {
		tasks = tasks[:c.limit]
	}
	if c.asJSON {
		return jsonLines(c.stdout, tasks)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tOWNER\tCREATED\tUPDATED\tMESSAGE")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Status, t.Tool, cmp.Or(t.Owner, "-"),
			t.CreatedAt.UTC().Format(time.DateTime), t.LastUpdatedAt.UTC().Format(time.DateTime), shorten(t.StatusMessage, 60))
	}
	return tw.Flush()
}

// jsonLines prints each item as one line of JSON (the --json of list).
func jsonLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

// shorten keeps a status message on one table line.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func (c *tasksCLI) get(ctx context.Context, b *backend.Backend, id string) error {
	t, err := b.Store.Get(ctx, id)
	if errors.Is(err, taskstate.ErrNotFound) {
		return fmt.Errorf("no task %s: an unknown id, or its record expired or was purged", id)
	}
	if err != nil {
		return err
	}
	// A result kept in a blob is shown in place, as the record holds it.
	if t, err = taskstate.ResolveResult(ctx, b.Store, t); err != nil {
		return err
	}
	out, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", out)
	return err
}

// cancel cancels each task the way tasks/cancel does and reports on each.
// It listens for its own cancel broadcast, so that it returns only once the
// broadcast has reached the bus that running handlers listen on.
func (c *tasksCLI) cancel(ctx context.Context, b *backend.Backend, ids []string) error {
	prod, ids, failed := c.producerFor(b, ids)
	for _, id := range ids {
		heard := make(chan struct{}, 1)
		sub, err := b.Bus.Subscribe(ctx, broker.TopicCancel, id, func(string, []byte) {
			select {
			case heard <- struct{}{}:
			default:
			}
		})
		if err != nil {
			return err
		}
		t, err := prod.Cancel(ctx, id, cancelReason)
		switch {
		case err == nil:
			select {
			case <-heard:
				fmt.Fprintf(c.stdout, "%s: cancelled\n", id)
			case <-time.After(c.timeout):
				fmt.Fprintf(c.stdout, "%s: cancelled (its broadcast was not seen within %s: a running handler stops when its worker next reads the record)\n", id, c.timeout)
			}
		case errors.Is(err, producer.ErrTerminal) && t != nil:
			fmt.Fprintf(c.stdout, "%s: already terminal (%s)\n", id, t.Status)
		case errors.Is(err, taskstate.ErrNotFound):
			fmt.Fprintf(c.stdout, "%s: not found\n", id)
			failed = true
		default:
			fmt.Fprintf(c.stdout, "%s: error: %v\n", id, err)
			failed = true
		}
		_ = sub.Close()
	}
	if failed {
		return errReported
	}
	return nil
}

// producerFor is the producer of the commands that act on tasks by id
// (cancel, replay), and the ids a task could have: each other one is
// reported "not found" here (failed says there was one).
func (c *tasksCLI) producerFor(b *backend.Backend, ids []string) (_ *producer.Producer, valid []string, failed bool) {
	for _, id := range ids {
		if taskstate.ValidID(id) {
			valid = append(valid, id)
			continue
		}
		fmt.Fprintf(c.stdout, "%s: not found\n", id)
		failed = true
	}
	return producer.New(b.Store, producer.QueueExecutor{Queue: b.Queue, Bus: b.Bus}, &producer.Config{Logger: c.log}), valid, failed
}

func (c *tasksCLI) purge(ctx context.Context, b *backend.Backend) error {
	tasks, err := c.scan(ctx, b, false)
	if err != nil {
		return err
	}
	byStatus := map[taskstate.Status]int{}
	var done, gone, failed int
	for _, t := range tasks {
		if !t.Status.Terminal() {
			continue
		}
		if c.dryRun {
			byStatus[t.Status]++
			done++
			continue
		}
		switch err := b.Store.Delete(ctx, t.ID); {
		case err == nil:
			byStatus[t.Status]++
			done++
		case errors.Is(err, taskstate.ErrNotFound), errors.Is(err, taskstate.ErrConflict):
			gone++ // expired or purged meanwhile
		default:
			fmt.Fprintf(c.stderr, "%s: %v\n", t.ID, err)
			failed++
		}
	}
	var parts []string
	for _, s := range []taskstate.Status{taskstate.Completed, taskstate.Failed, taskstate.Cancelled} {
		if byStatus[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, byStatus[s]))
		}
	}
	verb := "purged"
	if c.dryRun {
		verb = "would purge"
	}
	fmt.Fprintf(c.stdout, "%s %d terminal tasks", verb, done)
	if len(parts) > 0 {
		fmt.Fprintf(c.stdout, " (%s)", strings.Join(parts, ", "))
	}
	if gone > 0 {
		fmt.Fprintf(c.stdout, "; %d were already gone", gone)
	}
	if failed > 0 {
		fmt.Fprintf(c.stdout, "; %d could not be deleted", failed)
	}
	fmt.Fprintln(c.stdout)
	if failed > 0 {
		return errReported
	}
	return nil
}
