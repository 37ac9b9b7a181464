package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/connutil"
)

// Env binds the flags of one FlagSet to environment variables, strictly:
//
//   - A variable that is set and not empty is parsed as its flag's value
//     would be; a bad value (MCPQ_CONCURRENCY=abc, MCPQ_LEASE=5 without a
//     unit, MCPQ_REQUIRE_DURABLE=yes) is an error naming the variable and the
//     value, reported by CheckFlags, never a silent fallback to the default.
//   - Booleans are true, false, 1 or 0 (on the command line too), nothing
//     else. Durations need a unit (30s, 5m), except 0.
//   - A flag given on the command line wins over its variable, and then a bad
//     value of the variable is not an error: the variable is not used.
//   - An empty variable counts as unset (compose files pass ${X:-}).
//
// Env lives in the FlagSet itself, as the value of its --print-config flag,
// so every package that registers flags on the same set (cli.Options,
// worker.Options, cmd/api) shares one, and no state lives anywhere else.
type Env struct {
	fs      *flag.FlagSet
	print   bool // --print-config
	binds   []*binding
	byFlag  map[string]*binding
	envOnly []*envSetting
}

type binding struct {
	flag, env string
	raw       string // the variable's value; "" when unset or empty
	err       error  // why raw is no value of the flag
	secret    bool
	check     func(string) error // the value, from whichever source
}

// envSetting is a variable read without a flag (MCPQ_STATE_KEY).
type envSetting struct {
	env    string
	p      *string
	secret bool
}

// ErrConfigPrinted is returned by ParseFlags and CheckFlags after
// --print-config printed the configuration: the caller exits with status 0.
var ErrConfigPrinted = errors.New("configuration printed")

const printConfigUsage = "print the effective configuration — every setting's flag, environment variable, value and where the value came from (flag, env or default), secrets masked — and exit"

// EnvOf returns the Env of fs, registering --print-config on first use.
func EnvOf(fs *flag.FlagSet) *Env {
	if f := fs.Lookup("print-config"); f != nil {
		if p, ok := f.Value.(*printFlag); ok {
			return p.env
		}
	}
	e := &Env{fs: fs, byFlag: map[string]*binding{}}
	fs.Var(&printFlag{env: e}, "print-config", printConfigUsage)
	return e
}

// printFlag is the value of --print-config, and where its FlagSet keeps
// its Env.
type printFlag struct{ env *Env }

func (p *printFlag) String() string {
	return strconv.FormatBool(p != nil && p.env != nil && p.env.print)
}
func (p *printFlag) IsBoolFlag() bool { return true }
func (p *printFlag) Set(s string) error {
	v, err := parseBool(s)
	p.env.print = v
	return err
}

// String registers a string flag defaulting from env.
func (e *Env) String(p *string, name, env, def, usage string) {
	e.fs.StringVar(p, name, def, withEnv(usage, env))
	e.bind(name, env)
}

// Choice is String, restricted to the allowed values (from either source).
func (e *Env) Choice(p *string, name, env, def, usage string, allowed ...string) {
	e.String(p, name, env, def, usage)
	e.byFlag[name].check = func(v string) error {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
		}
		return nil
	}
}

// Int registers an int flag defaulting from env.
func (e *Env) Int(p *int, name, env string, def int, usage string) {
	e.fs.IntVar(p, name, def, withEnv(usage, env))
	e.bind(name, env)
}

// Int64 registers an int64 flag defaulting from env.
func (e *Env) Int64(p *int64, name, env string, def int64, usage string) {
	e.fs.Int64Var(p, name, def, withEnv(usage, env))
	e.bind(name, env)
}

// Float64 registers a float flag defaulting from env.
func (e *Env) Float64(p *float64, name, env string, def float64, usage string) {
	e.fs.Float64Var(p, name, def, withEnv(usage, env))
	e.bind(name, env)
}

// Duration registers a duration flag defaulting from env.
func (e *Env) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	e.fs.DurationVar(p, name, def, withEnv(usage, env))
	e.bind(name, env)
}

// Bool registers a boolean flag defaulting from env: true, false, 1 or 0.
func (e *Env) Bool(p *bool, name, env string, def bool, usage string) {
	*p = def
	e.fs.Var((*boolValue)(p), name, withEnv(usage, env))
	e.bind(name, env)
}

// List registers a comma-separated list flag defaulting from env (blanks
// dropped, see SplitList).
func (e *Env) List(p *[]string, name, env, usage string) {
	e.fs.Var(&listValue{p}, name, withEnv(usage, env))
	e.bind(name, env)
}

// Secret marks flags whose values --print-config masks.
func (e *Env) Secret(names ...string) {
	for _, n := range names {
		e.byFlag[n].secret = true
	}
}

// EnvOnly reads a string setting that has no flag (such as MCPQ_STATE_KEY)
// into p, so that --print-config shows it too.
func (e *Env) EnvOnly(p *string, env string, secret bool) {
	*p = os.Getenv(env)
	e.envOnly = append(e.envOnly, &envSetting{env: env, p: p, secret: secret})
}

func withEnv(usage, env string) string { return usage + " (env " + env + ")" }

func (e *Env) bind(name, env string) {
	f := e.fs.Lookup(name)
	b := &binding{flag: name, env: env}
	e.binds = append(e.binds, b)
	e.byFlag[name] = b
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return
	}
	b.raw = v
	if err := f.Value.Set(v); err != nil {
		b.err = err
		_ = f.Value.Set(f.DefValue) // keep the default; CheckFlags reports the variable
	}
}

// ParseFlags parses args into fs and then runs CheckFlags. It never exits
// (it sets fs to flag.ContinueOnError): -h prints the usage to fs's output
// and returns flag.ErrHelp; a bad command line — an unknown flag, a flag
// without its value, a value its flag cannot hold — is an error of one line
// that names the flag, the value and what the flag wants, as a bad variable
// is, and prints no usage.
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	return CheckFlags(fs, stdout)
}

// parseArgs is fs.Parse with the errors ParseFlags promises.
func parseArgs(fs *flag.FlagSet, args []string) error {
	fs.Init(fs.Name(), flag.ContinueOnError)
	var bad *badValue
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		orig[f] = f.Value
		f.Value = &recordingValue{Value: f.Value, name: f.Name, bad: &bad}
	})
	out := fs.Output()
	var usage bytes.Buffer
	fs.SetOutput(&usage) // Parse prints the usage on every error; only -h shows it
	err := fs.Parse(args)
	fs.SetOutput(out)
	for f, v := range orig {
		f.Value = v
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		_, _ = out.Write(usage.Bytes())
		return err
	case bad != nil:
		return fmt.Errorf("--%s %q: %s", bad.name, bad.value, want(fs.Lookup(bad.name), bad.err))
	}
	return fmt.Errorf("%w (%s -h lists the flags)", err, fs.Name())
}

// badValue is the first value a flag refused during parseArgs.
type badValue struct {
	name, value string
	err         error
}

// recordingValue wraps a flag's value during parseArgs to learn which flag
// refused which value (the flag package's error says only "parse error").
type recordingValue struct {
	flag.Value
	name string
	bad  **badValue
}

func (r *recordingValue) Set(s string) error {
	err := r.Value.Set(s)
	if err != nil && *r.bad == nil {
		*r.bad = &badValue{name: r.name, value: s, err: err}
	}
	return err
}

// IsBoolFlag keeps a boolean flag one that takes no value.
func (r *recordingValue) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// CheckFlags reports every environment variable of fs that holds no value
// of its flag (and is not overridden on the command line) and every value
// that its flag refuses, naming the variable (or flag) and the value. With
// --print-config it then prints the configuration to stdout and returns
// ErrConfigPrinted.
func CheckFlags(fs *flag.FlagSet, stdout io.Writer) error {
	e := EnvOf(fs)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, b := range e.binds {
		f := fs.Lookup(b.flag)
		switch {
		case !set[b.flag] && b.err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: %s (the environment variable of --%s)", b.env, b.raw, want(f, b.err), b.flag))
		case b.check != nil:
			if err := b.check(f.Value.String()); err != nil {
				if set[b.flag] {
					errs = append(errs, fmt.Errorf("--%s %q: %w", b.flag, f.Value.String(), err))
				} else {
					errs = append(errs, fmt.Errorf("%s=%q: %w (the environment variable of --%s)", b.env, f.Value.String(), err, b.flag))
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bad configuration: %w", err)
	}
	if e.print {
		e.printConfig(stdout, set)
		return ErrConfigPrinted
	}
	return nil
}

// ParseFlagsOrExit is ParseFlags for a main: -h prints the usage and
// --print-config the configuration, both exiting with status 0; a bad
// setting is reported in one line on standard error with exit status 2.
func ParseFlagsOrExit(fs *flag.FlagSet, args []string) {
	switch err := ParseFlags(fs, args, os.Stdout); {
	case errors.Is(err, ErrConfigPrinted), errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		os.Exit(2)
	}
}

// want says what a variable of flag f must hold.
func want(f *flag.Flag, err error) string {
	if _, ok := f.Value.(*boolValue); ok {
		return "want true, false, 1 or 0"
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "int":
		return "want an integer"
	case "float":
		return "want a number"
	case "duration":
		return "want a duration with a unit, such as 500ms, 30s or 5m"
	}
	return err.Error()
}

func (e *Env) printConfig(w io.Writer, set map[string]bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLAG\tENV\tVALUE\tSOURCE")
	e.fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "print-config" {
			return
		}
		env, src, secret := "-", "default", false
		if b := e.byFlag[f.Name]; b != nil {
			env, secret = b.env, b.secret
			if b.raw != "" && b.err == nil {
				src = "env"
			}
		}
		if set[f.Name] {
			src = "flag"
		}
		fmt.Fprintf(tw, "--%s\t%s\t%s\t%s\n", f.Name, env, shown(f.Value.String(), secret), src)
	})
	for _, s := range e.envOnly {
		src := "unset"
		if *s.p != "" {
			src = "env"
		}
		fmt.Fprintf(tw, "-\t%s\t%s\t%s\n", s.env, shown(*s.p, s.secret), src)
	}
	_ = tw.Flush()
}

// shown is v as --print-config shows it: "" quoted, a secret masked, and
// the password of any URL in it masked.
func shown(v string, secret bool) string {
	switch {
	case v == "":
		return `""`
	case secret:
		return "****"
	}
	return connutil.Redact(v)
}

// boolValue is a flag.Value for a strict boolean: true, false, 1 or 0.
type boolValue bool

func (b *boolValue) Set(s string) error {
	v, err := parseBool(s)
	if err != nil {
		return err
	}
	*b = boolValue(v)
	return nil
}
func (b *boolValue) String() string   { return strconv.FormatBool(b != nil && bool(*b)) }
func (b *boolValue) IsBoolFlag() bool { return true }

func parseBool(s string) (bool, error) {
	switch s {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean: want true, false, 1 or 0", s)
}

// listValue is a flag.Value for a comma-separated list.
type listValue struct{ p *[]string }

func (l *listValue) Set(s string) error { *l.p = connutil.SplitList(s); return nil }
func (l *listValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}
