package cli

import (
	"flag"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// --version prints the flag set's name and Version, and exits 0 before any
// other flag is acted on. The test binary runs itself to see the exit.
func TestVersionFlag(t *testing.T) {
	if os.Getenv("WIRING_VERSION_CHILD") == "1" {
		fs := flag.NewFlagSet("probe-bin", flag.ExitOnError)
		var o Options
		o.Flags(fs)
		_ = fs.Parse([]string{"--version", "--broker", "none"})
		os.Exit(3) // not reached: --version exits
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestVersionFlag$")
	cmd.Env = append(os.Environ(), "WIRING_VERSION_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	want := "probe-bin " + Version() + "\n"
	if string(out) != want || !strings.Contains(want, runtime.Version()) {
		t.Fatalf("--version printed %q, want %q (naming %s)", out, want, runtime.Version())
	}
}
