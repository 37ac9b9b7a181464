package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// envFlags is a FlagSet with one flag of each kind Env registers.
type envFlags struct {
	fs     *flag.FlagSet
	n      int
	d      time.Duration
	b      bool
	f      float64
	s      string
	choice string
	list   []string
	secret string
	key    string
}

func newEnvFlags() *envFlags {
	v := &envFlags{fs: flag.NewFlagSet("t", flag.ContinueOnError)}
	v.fs.SetOutput(io.Discard)
	e := EnvOf(v.fs)
	e.Int(&v.n, "n", "T_N", 8, "an int")
	e.Duration(&v.d, "d", "T_D", time.Second, "a duration")
	e.Bool(&v.b, "b", "T_B", false, "a bool")
	e.Float64(&v.f, "f", "T_F", 0, "a float")
	e.String(&v.s, "s", "T_S", "def", "a URL")
	e.Choice(&v.choice, "c", "T_C", "x", "a choice", "x", "y")
	e.List(&v.list, "l", "T_L", "a list")
	e.String(&v.secret, "p", "T_P", "", "a password")
	e.Secret("p")
	e.EnvOnly(&v.key, "T_KEY", true)
	return v
}

func TestEnvBadValuesNameTheVariable(t *testing.T) {
	for _, c := range []struct{ env, value, want string }{
		{"T_N", "abc", `T_N="abc": want an integer (the environment variable of --n)`},
		{"T_D", "5", `T_D="5": want a duration with a unit`},
		{"T_B", "yes-please", `T_B="yes-please": want true, false, 1 or 0`},
		{"T_B", "TRUE", `T_B="TRUE": want true, false, 1 or 0`},
		{"T_F", "1,5", `T_F="1,5": want a number`},
		{"T_C", "z", `T_C="z": want one of x, y (the environment variable of --c)`},
	} {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			v := newEnvFlags()
			err := ParseFlags(v.fs, nil, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			// The command line wins, and then the variable is not used.
			v = newEnvFlags()
			arg := map[string]string{"T_N": "-n=3", "T_D": "-d=2s", "T_B": "-b=true", "T_F": "-f=1.5", "T_C": "-c=y"}[c.env]
			if err := ParseFlags(v.fs, []string{arg}, io.Discard); err != nil {
				t.Fatalf("with %s on the command line: %v", arg, err)
			}
		})
	}
}

func TestEnvGoodValues(t *testing.T) {
	for k, val := range map[string]string{"T_N": "16", "T_D": "0", "T_B": "true", "T_F": "2.5", "T_S": "redis://u:pw@h:1/0", "T_C": "y", "T_L": "a, b,,c", "T_P": "hunter2", "T_KEY": "k"} {
		t.Setenv(k, val)
	}
	v := newEnvFlags()
	if err := ParseFlags(v.fs, []string{"-n", "4"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if v.n != 4 || v.d != 0 || !v.b || v.f != 2.5 || v.choice != "y" || strings.Join(v.list, "|") != "a|b|c" || v.secret != "hunter2" || v.key != "k" {
		t.Fatalf("parsed %+v", v)
	}
	for _, b := range []struct {
		value string
		want  bool
	}{{"1", true}, {"0", false}, {"false", false}, {"true", true}} {
		t.Setenv("T_B", b.value)
		v := newEnvFlags()
		if err := ParseFlags(v.fs, nil, io.Discard); err != nil || v.b != b.want {
			t.Errorf("T_B=%s: %v, %v; want %v", b.value, v.b, err, b.want)
		}
	}
	// An empty variable is unset.
	t.Setenv("T_N", "")
	v = newEnvFlags()
	if err := ParseFlags(v.fs, nil, io.Discard); err != nil || v.n != 8 {
		t.Fatalf("T_N empty: n=%d, %v; want the default 8", v.n, err)
	}
}

func TestEnvStrictOnTheCommandLine(t *testing.T) {
	for _, args := range [][]string{{"-b=yes"}, {"-c", "z"}} {
		v := newEnvFlags()
		err := ParseFlags(v.fs, args, io.Discard)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	v := newEnvFlags()
	if err := ParseFlags(v.fs, []string{"-c", "z"}, io.Discard); err == nil || !strings.Contains(err.Error(), `--c "z": want one of x, y`) {
		t.Errorf("-c z: %v", err)
	}
}

// A bad command line is one error naming the flag, the value and what the
// flag wants, and prints no usage; -h prints the usage and is flag.ErrHelp.
func TestCommandLineErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "5"}, `--d "5": want a duration with a unit, such as 500ms, 30s or 5m`},
		{[]string{"-n=abc"}, `--n "abc": want an integer`},
		{[]string{"-f", "1,5"}, `--f "1,5": want a number`},
		{[]string{"-b=yes"}, `--b "yes": want true, false, 1 or 0`},
		{[]string{"-nope"}, "flag provided but not defined: -nope (t -h lists the flags)"},
		{[]string{"-d"}, "flag needs an argument: -d (t -h lists the flags)"},
	} {
		v := newEnvFlags()
		var usage strings.Builder
		v.fs.SetOutput(&usage)
		err := ParseFlags(v.fs, c.args, io.Discard)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if usage.Len() > 0 {
			t.Errorf("%v printed the usage:\n%s", c.args, usage.String())
		}
		if kind, _ := flag.UnquoteUsage(v.fs.Lookup("d")); kind != "duration" {
			t.Errorf("%v: the flag's value is still wrapped (kind %q)", c.args, kind)
		}
	}
	v := newEnvFlags()
	var usage strings.Builder
	v.fs.SetOutput(&usage)
	if err := ParseFlags(v.fs, []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) || !strings.Contains(usage.String(), "a duration") {
		t.Errorf("-h: %v, usage %q; want flag.ErrHelp and the usage", err, usage.String())
	}
	// A boolean flag still takes no value after the wrapping.
	v = newEnvFlags()
	if err := ParseFlags(v.fs, []string{"-b", "-n", "3"}, io.Discard); err != nil || !v.b || v.n != 3 {
		t.Errorf("-b -n 3: %v, b=%v n=%d", err, v.b, v.n)
	}
}

func TestPrintConfig(t *testing.T) {
	t.Setenv("T_S", "redis://app:s3cret@h:1/0")
	t.Setenv("T_P", "hunter2")
	t.Setenv("T_KEY", "state-key-value")
	t.Setenv("T_N", "12")
	v := newEnvFlags()
	var out strings.Builder
	err := ParseFlags(v.fs, []string{"--print-config", "-d", "3s"}, &out)
	if !errors.Is(err, ErrConfigPrinted) {
		t.Fatalf("ParseFlags: %v, want ErrConfigPrinted", err)
	}
	got := out.String()
	for _, secret := range []string{"s3cret", "hunter2", "state-key-value"} {
		if strings.Contains(got, secret) {
			t.Errorf("--print-config shows the secret %q:\n%s", secret, got)
		}
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(got, "\n") {
		if f := strings.Fields(l); len(f) == 4 {
			lines[f[0]+" "+f[1]] = f[2:]
		}
	}
	for row, want := range map[string][]string{
		"--n T_N":  {"12", "env"},
		"--d T_D":  {"3s", "flag"},
		"--b T_B":  {"false", "default"},
		"--s T_S":  {"redis://app:****@h:1/0", "env"},
		"--p T_P":  {"****", "env"},
		"- T_KEY":  {"****", "env"},
		"--l T_L":  {`""`, "default"},
		"--c T_C":  {"x", "default"},
		"--f T_F":  {"0", "default"},
		"FLAG ENV": {"VALUE", "SOURCE"},
	} {
		if g := lines[row]; strings.Join(g, " ") != strings.Join(want, " ") {
			t.Errorf("row %q: %v, want %v\n%s", row, g, want, got)
		}
	}
}
