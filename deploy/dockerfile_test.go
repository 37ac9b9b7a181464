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

// scriptBuild reads the `go build -o "$out/bin/" PKG...` of
// scripts/images.sh, which both ways of building the images run: the names
// of the binaries it writes, the packages, and the whole command.
func scriptBuild(t *testing.T, root string) (bins, pkgs []string, cmd string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "scripts", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(script, "\n") {
		before, args, ok := strings.Cut(line, " go build ")
		if !ok || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		f := strings.Fields(args)
		i := slices.Index(f, "-o")
		if i < 0 || i+1 >= len(f) || f[i+1] != `"$out/bin/"` {
			t.Fatalf("scripts/images.sh: %q should write into \"$out/bin/\"", line)
		}
		for _, a := range f[i+2:] {
			pkgs = append(pkgs, a)
			name := path.Base(a)
			if regexp.MustCompile(`^v[0-9]+$`).MatchString(name) { // go build names a .../vN command after its parent
				name = path.Base(path.Dir(a))
			}
			bins = append(bins, name)
		}
		cmd = before + " go build " + args
	}
	if cmd == "" {
		t.Fatal("scripts/images.sh runs no go build")
	}
	return bins, pkgs, cmd
}

// The registry build (the build stage) and the offline one (scripts/images.sh
// with BINARIES=prebuilt) put the same tree in the bin stage: the build stage
// runs the script with the Go of go.mod, the prebuilt stage copies what the
// script wrote. The script builds static binaries of commands that exist, and
// the targets run them as a numeric non-root user, copying only from bin.
// (CI builds and runs the offline images: deploy/images_test.go.)
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	d := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(mod)
	build, prebuilt, bin := d.byName["build"], d.byName["prebuilt"], d.byName["bin"]
	if build == nil || prebuilt == nil || bin == nil || goVersion == nil {
		t.Fatalf("want stages build, prebuilt and bin (stages %v) and a go directive in go.mod", d.names())
	}
	if want := "golang:" + string(goVersion[1]); build.from != want {
		t.Errorf("build stage is FROM %s; go.mod says go %s (want %s)", build.from, goVersion[1], want)
	}
	if !slices.Contains(build.env, "CGO_ENABLED=0") {
		t.Error("build stage does not set CGO_ENABLED=0: the binaries would need a libc the scratch image lacks")
	}
	for _, c := range build.copies {
		for _, src := range c.srcs {
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("build stage copies %s: %v", src, err)
			}
		}
	}
	var out string
	for _, run := range build.runs {
		if m := regexp.MustCompile(`scripts/images\.sh binaries (\S+)$`).FindStringSubmatch(run); m != nil {
			out = m[1]
		}
	}
	if out == "" {
		t.Fatalf("build stage does not run scripts/images.sh binaries DIR (runs %q)", build.runs)
	}
	if len(prebuilt.copies) != 1 || prebuilt.copies[0].from != "" || prebuilt.copies[0].dst != out+"/" {
		t.Errorf("prebuilt stage should copy the prepared context's out/ to %s/, as the build stage writes it; copies %+v", out, prebuilt.copies)
	}
	if bin.from != "build" || len(bin.copies)+len(bin.runs) != 0 {
		t.Errorf("bin stage is FROM %s with instructions; want an alias of build (or prebuilt, by BINARIES)", bin.from)
	}

	bins, pkgs, cmd := scriptBuild(t, root)
	if !strings.Contains(cmd, "CGO_ENABLED=0 ") || !strings.Contains(cmd, "-trimpath") {
		t.Errorf("scripts/images.sh builds with %q; want CGO_ENABLED=0 and -trimpath", cmd)
	}
	var local []string // the module's own packages, for .dockerignore
	for _, pkg := range pkgs {
		if !strings.HasPrefix(pkg, "./") {
			continue
		}
		local = append(local, pkg)
		src, err := os.ReadFile(filepath.Join(root, pkg, "main.go"))
		if err != nil || !bytes.Contains(src, []byte("\nfunc main()")) {
			t.Errorf("scripts/images.sh builds %s, which is not a command of this module (%v)", pkg, err)
		}
	}

	for target, program := range map[string]string{"api": "api", "worker": "worker", "nats": "nats-server"} {
		s := d.byName[target]
		if s == nil {
			t.Errorf("no %s stage", target)
			continue
		}
		if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(s.user) {
			t.Errorf("%s stage runs as %q; want a numeric non-root uid:gid (Kubernetes' runAsNonRoot checks the number)", target, s.user)
		}
		if want := "/usr/local/bin/" + program; s.entrypoint != want || !d.provides(target, want) {
			t.Errorf("%s stage: entrypoint %q, want %s copied into the stage (so `%s …` runs in docker compose exec)", target, s.entrypoint, want, program)
		}
		for _, st := range d.chain(target) {
			for _, c := range st.copies {
				if c.from != "bin" {
					t.Errorf("%s stage copies %v from %q; only the bin stage's tree belongs in it", target, c.srcs, c.from)
					continue
				}
				for _, src := range c.srcs {
					if name, ok := strings.CutPrefix(src, out+"/bin/"); ok && !slices.Contains(bins, name) {
						t.Errorf("%s stage copies %s, which scripts/images.sh does not build (it builds %v)", target, src, bins)
					}
				}
			}
		}
	}
	checkDockerignore(t, root, local, "scripts/images.sh")
}

// checkDockerignore fails if .dockerignore drops a file the build needs:
// go.mod, go.sum, files, or a directory of a package the binaries are built from.
func checkDockerignore(t *testing.T, root string, pkgs []string, files ...string) {
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
	need := append([]string{"go.mod", "go.sum"}, files...)
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
