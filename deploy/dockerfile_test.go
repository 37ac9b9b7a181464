package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// stage is one FROM section of a Dockerfile, read as far as these checks
// need: where it starts, what it copies in, as whom and what it runs.
type stage struct {
	name, from string
	user       string
	env        []string
	runs       []string
	copies     []copyInst
	entrypoint string // the program of an exec-form ENTRYPOINT
}

type copyInst struct {
	from      string // --from (a stage or an image), "" for the build context
	srcs      []string
	dst       string
	producing []string // the paths it creates in the stage
}

type dockerfile struct {
	args   map[string]string // ARG defaults before the first FROM
	stages []*stage
	byName map[string]*stage
}

var fromLine = regexp.MustCompile(`^(?i:FROM)\s+(\S+)(?:\s+(?i:AS)\s+(\S+))?$`)

// parseDockerfile reads the instructions of path (comments dropped,
// continuation lines joined, ${ARG} defaults substituted in FROM).
func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &dockerfile{args: map[string]string{}, byName: map[string]*stage{}}
	var cur *stage
	var logical string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && logical == "") {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			logical += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		inst := strings.TrimSpace(logical + trimmed)
		logical = ""
		if inst == "" {
			continue
		}
		word, rest, _ := strings.Cut(inst, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "ARG":
			if cur == nil {
				k, v, _ := strings.Cut(rest, "=")
				d.args[k] = v
			}
		case "FROM":
			m := fromLine.FindStringSubmatch(inst)
			if m == nil {
				t.Fatalf("Dockerfile: cannot read %q", inst)
			}
			from := os.Expand(m[1], func(k string) string { return d.args[k] })
			cur = &stage{name: m[2], from: from}
			if parent, ok := d.byName[from]; ok { // FROM an earlier stage inherits it
				cur.user, cur.env = parent.user, slices.Clone(parent.env)
			}
			d.stages = append(d.stages, cur)
			if cur.name != "" {
				d.byName[cur.name] = cur
			}
		case "USER":
			cur.user = rest
		case "ENV":
			cur.env = append(cur.env, strings.Fields(rest)...)
		case "RUN":
			cur.runs = append(cur.runs, rest)
		case "COPY", "ADD":
			cur.copies = append(cur.copies, parseCopy(rest))
		case "ENTRYPOINT":
			if m := regexp.MustCompile(`^\["([^"]+)"`).FindStringSubmatch(rest); m != nil {
				cur.entrypoint = m[1]
			}
		}
	}
	return d
}

func parseCopy(rest string) copyInst {
	var c copyInst
	var args []string
	for _, f := range strings.Fields(rest) {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			c.from = v
		} else if !strings.HasPrefix(f, "--") {
			args = append(args, f)
		}
	}
	if len(args) < 2 {
		return c
	}
	c.srcs, c.dst = args[:len(args)-1], args[len(args)-1]
	for _, s := range c.srcs {
		if strings.HasSuffix(c.dst, "/") || len(c.srcs) > 1 {
			c.producing = append(c.producing, path.Join(c.dst, path.Base(s)))
		} else {
			c.producing = append(c.producing, c.dst)
		}
	}
	return c
}

func (d *dockerfile) names() []string {
	var out []string
	for _, s := range d.stages {
		out = append(out, s.name)
	}
	return out
}

// chain is the stage and the earlier stages it is built FROM.
func (d *dockerfile) chain(name string) []*stage {
	var out []*stage
	for s := d.byName[name]; s != nil; s = d.byName[s.from] {
		out = append(out, s)
	}
	return out
}

// provides reports whether stage name (or a stage it builds on) copies file in.
func (d *dockerfile) provides(name, file string) bool {
	for _, s := range d.chain(name) {
		for _, c := range s.copies {
			if slices.Contains(c.producing, file) {
				return true
			}
		}
	}
	return false
}

// goBuild reads a `go build -o DIR/ PKG...` in stage s: the binaries it
// writes, by path, and the packages.
func goBuild(t *testing.T, s *stage) (outs, pkgs []string) {
	t.Helper()
	for _, run := range s.runs {
		_, cmd, ok := strings.Cut(run, "go build ")
		if !ok {
			continue
		}
		f := strings.Fields(cmd)
		i := slices.Index(f, "-o")
		if i < 0 || i+1 >= len(f) || !strings.HasSuffix(f[i+1], "/") {
			t.Fatalf("Dockerfile: %q should write into a directory (-o DIR/)", run)
		}
		for _, a := range f[i+2:] {
			if strings.HasPrefix(a, "./") {
				pkgs = append(pkgs, a)
				outs = append(outs, path.Join(f[i+1], path.Base(a)))
			}
		}
	}
	return outs, pkgs
}

// The Dockerfile builds the binaries from packages that exist, with the Go
// of go.mod, statically, and the api and worker targets run them as a
// non-root user with what their health checks need.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	d := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(mod)
	build := d.byName["build"]
	if build == nil || goVersion == nil {
		t.Fatalf("no build stage (stages %v) or no go directive in go.mod", d.names())
	}
	if want := "golang:" + string(goVersion[1]); build.from != want {
		t.Errorf("build stage is FROM %s; go.mod says go %s (want %s)", build.from, goVersion[1], want)
	}
	if !slices.Contains(build.env, "CGO_ENABLED=0") {
		t.Error("build stage does not set CGO_ENABLED=0: the binaries would need a libc the distroless image lacks")
	}
	outs, pkgs := goBuild(t, build)
	for _, pkg := range pkgs {
		src, err := os.ReadFile(filepath.Join(root, pkg, "main.go"))
		if err != nil || !bytes.Contains(src, []byte("\nfunc main()")) {
			t.Errorf("Dockerfile builds %s, which is not a command of this module (%v)", pkg, err)
		}
	}
	for _, c := range build.copies {
		for _, src := range c.srcs {
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("build stage copies %s: %v", src, err)
			}
		}
	}

	for _, target := range []string{"api", "worker"} {
		s := d.byName[target]
		if s == nil {
			t.Errorf("no %s stage", target)
			continue
		}
		if u := s.user; u == "" || u == "root" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root:") {
			t.Errorf("%s stage runs as %q; want a non-root user", target, u)
		}
		if want := "/usr/local/bin/" + target; s.entrypoint != want || !d.provides(target, want) {
			t.Errorf("%s stage: entrypoint %q, want %s copied into the stage (so `%s …` runs in docker compose exec)", target, s.entrypoint, want, target)
		}
		for _, st := range d.chain(target) {
			for _, c := range st.copies {
				from := d.byName[c.from]
				switch {
				case c.from == "":
					t.Errorf("%s stage copies %v from the build context; only build products belong in it", target, c.srcs)
				case from == nil:
					t.Errorf("%s stage copies from %q, which is no stage", target, c.from)
				case from == build:
					for _, src := range c.srcs {
						if !slices.Contains(outs, src) {
							t.Errorf("%s stage copies %s, which the go build (%v) does not write", target, src, outs)
						}
					}
				}
			}
		}
	}
	checkDockerignore(t, root, pkgs)
}

// checkDockerignore fails if .dockerignore drops a file the build needs:
// go.mod, go.sum or a directory of a package the binaries are built from.
func checkDockerignore(t *testing.T, root string, pkgs []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	need := []string{"go.mod", "go.sum"}
	for _, dir := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
			need = append(need, filepath.ToSlash(rel))
		}
	}
	for _, pat := range strings.Split(string(b), "\n") {
		pat = strings.TrimPrefix(strings.TrimSpace(pat), "/")
		if pat == "" || strings.HasPrefix(pat, "#") || strings.HasPrefix(pat, "!") {
			continue
		}
		for _, p := range need {
			if ignored(pat, p) {
				t.Errorf(".dockerignore pattern %q drops %s, which the image build needs", pat, p)
			}
		}
	}
}

// ignored reports whether a .dockerignore pattern matches p or a directory
// above it ("**" matches any number of directories).
func ignored(pattern, p string) bool {
	parts := strings.Split(p, "/")
	for i := 1; i <= len(parts); i++ {
		if matchParts(strings.Split(pattern, "/"), parts[:i]) {
			return true
		}
	}
	return false
}

func matchParts(pat, parts []string) bool {
	if len(pat) == 0 {
		return len(parts) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if matchParts(pat[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], parts[0])
	return ok && matchParts(pat[1:], parts[1:])
}
