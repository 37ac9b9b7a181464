// Package binflags reads what a built mcpqueue binary accepts — its flags and
// the environment variables they default from — out of its -h output, so the
// deployment checks (deploy/ for docker compose, deploy/helm/test for the Helm
// chart) hold their settings against the real binaries, not a copied list.
package binflags

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// Flag is one flag of a binary, as its -h output shows it.
type Flag struct {
	Name, Type string // Type "" for a boolean
}

// Binary is a built command: its flags by name and by environment variable.
type Binary struct {
	Flags map[string]Flag
	ByEnv map[string]Flag
	image []byte // the executable, for variables read without a flag
}

// Build compiles the main packages pkgs (e.g. "./cmd/api") of the module at
// root into dir and reads each one's -h; the result is keyed by the last
// element of the package path.
func Build(root, dir string, pkgs ...string) (map[string]*Binary, error) {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("binflags: go build: %w\n%s", err, out)
	}
	bins := map[string]*Binary{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		b, err := Read(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		bins[name] = b
	}
	return bins, nil
}

var (
	flagHead = regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\S+))?$`)
	envName  = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`)
)

// Read runs the binary at path with -h (and an empty environment, so the
// defaults are its own) and parses the flags it lists.
func Read(path string) (*Binary, error) {
	var help bytes.Buffer
	cmd := exec.Command(path, "-h")
	cmd.Stdout, cmd.Stderr = &help, &help
	cmd.Env = []string{}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("binflags: %s -h: %w\n%s", path, err, help.String())
	}
	b := &Binary{Flags: map[string]Flag{}, ByEnv: map[string]Flag{}}
	var cur *Flag
	sc := bufio.NewScanner(&help)
	for sc.Scan() {
		if m := flagHead.FindStringSubmatch(sc.Text()); m != nil {
			cur = &Flag{Name: m[1], Type: m[2]}
			b.Flags[cur.Name] = *cur
			continue
		}
		if cur != nil {
			for _, m := range envName.FindAllStringSubmatch(sc.Text(), -1) {
				b.ByEnv[m[1]] = *cur
			}
		}
	}
	if len(b.Flags) == 0 {
		return nil, fmt.Errorf("binflags: %s -h lists no flags:\n%s", path, help.String())
	}
	var err error
	b.image, err = os.ReadFile(path)
	return b, err
}

// ReadsEnv reports whether the binary reads environment variable k: a flag
// names it, or its code holds the name (variables read without a flag, such
// as MCPQ_STATE_KEY or the OTEL_* ones).
func (b *Binary) ReadsEnv(k string) bool {
	_, ok := b.ByEnv[k]
	return ok || bytes.Contains(b.image, []byte(k))
}

// ValueError says why v is no value for flag f ("" if it is one): the
// binaries parse their variables strictly (internal/cli.Env), so such a value
// would refuse to start.
func (f Flag) ValueError(v string) string {
	var err error
	switch {
	case v == "":
		return "" // empty counts as unset
	case f.Type == "":
		if v != "true" && v != "false" && v != "1" && v != "0" {
			return "is no boolean (true, false, 1 or 0)"
		}
	case f.Type == "int":
		_, err = strconv.Atoi(v)
	case f.Type == "duration":
		_, err = time.ParseDuration(v)
	case f.Type == "float":
		_, err = strconv.ParseFloat(v, 64)
	}
	if err != nil {
		return "is no " + f.Type + " (the binary would refuse to start)"
	}
	return ""
}
