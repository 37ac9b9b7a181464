package cli

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Set by the linker (-ldflags -X, scripts/images.sh) for builds that carry
// no VCS information, such as a docker build without .git; nothing else
// writes them.
var (
	linkedVersion  string
	linkedRevision string
)

// Version describes the running binary: its version and source revision,
// from the linker flags above or else from the build information Go records
// (the module version and, in a git checkout, vcs.revision), and the Go
// release it was built with.
func Version() string {
	version, revision, dirty, goVersion := linkedVersion, linkedRevision, false, "unknown Go"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if version == "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if revision == "" {
					revision = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true" && linkedRevision == ""
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	if revision == "" {
		revision = "unknown"
	} else if dirty && !strings.HasSuffix(version, "+dirty") {
		revision += " with uncommitted changes"
	}
	return fmt.Sprintf("%s (revision %s, %s)", version, revision, goVersion)
}

// versionFlag is --version: a boolean flag whose Set prints Version and
// exits, as -h prints the usage and exits.
type versionFlag struct{ fs *flag.FlagSet }

func (versionFlag) IsBoolFlag() bool { return true }
func (versionFlag) String() string   { return "" }
func (v versionFlag) Set(s string) error {
	if on, err := strconv.ParseBool(s); err != nil || !on {
		return err
	}
	fmt.Println(v.fs.Name(), Version())
	os.Exit(0)
	return nil
}
