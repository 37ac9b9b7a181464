// Package doccheck_test holds the documentation to what the repository
// builds: the README's worker code is the example module's main.go, which
// the integration tests build and run, its Go agent is examples/go-agent's
// main function, and every relative link in the
// README, docs/ and the repository's other Markdown resolves to a file of
// the repository, and each #anchor to one of the target's headings.
package doccheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's worker section shows the external example's main.go, whole.
func TestREADMEWorkerIsTheExample(t *testing.T) {
	r := root(t)
	readme := read(t, filepath.Join(r, "README.md"))
	example := read(t, filepath.Join(r, "examples", "external-worker", "main.go"))
	if !strings.Contains(readme, "```go\n"+example+"```") {
		t.Fatal("README.md does not show examples/external-worker/main.go verbatim in a ```go block: copy the file into the \"Writing a worker\" section")
	}
}

// The README's Go client section shows the agent example's main function,
// whole.
func TestREADMEAgentIsTheExample(t *testing.T) {
	r := root(t)
	readme := read(t, filepath.Join(r, "README.md"))
	agent := read(t, filepath.Join(r, "examples", "go-agent", "main.go"))
	i := strings.Index(agent, "func main() {")
	if i < 0 {
		t.Fatal("examples/go-agent/main.go has no func main")
	}
	if !strings.Contains(readme, "```go\n"+agent[i:]+"```") {
		t.Fatal("README.md does not show the main function of examples/go-agent/main.go verbatim in a ```go block: copy it into the \"Calling tools from Go\" section")
	}
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// Code is not prose: fenced blocks and inline code spans hold no links.
	fenced     = regexp.MustCompile("(?s)```.*?```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	heading    = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
)

// markdown lists the repository's Markdown files: README.md, docs/ and any
// other .md outside node_modules, testdata and hidden directories.
func markdown(t *testing.T, r string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != r && (n == "node_modules" || n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// slug is the anchor GitHub gives a heading: lower case, every character
// but letters, marks, digits, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func slug(h string) string {
	h = inlineCodeMarks.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var inlineCodeMarks = regexp.MustCompile("`([^`]*)`")

// anchors are the heading anchors of a Markdown text, a repeated heading's
// numbered as GitHub numbers them (-1, -2, …).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fenced.ReplaceAllString(text, ""), -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Operating: metrics, traces, logs, health":                                 "operating-metrics-traces-logs-health",
		"Against the reference server, short calls in one round trip (2026-12-01)": "against-the-reference-server-short-calls-in-one-round-trip-2026-12-01",
		"Parameter headers (SEP-2243)":                                             "parameter-headers-sep-2243",
		"`api tasks` and `--print-config`":                                         "api-tasks-and---print-config",
		"ADR 0001 — The MCP library question":                                      "adr-0001--the-mcp-library-question",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	a := anchors("# A\n\n```sh\n# not a heading\n```\n\n## A\n\n## B c\n")
	for _, want := range []string{"a", "a-1", "b-c"} {
		if !a[want] {
			t.Errorf("anchors: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("anchors: a comment in a code block counted as a heading")
	}
}

// Every relative link of the repository's Markdown (README.md, docs/, …)
// names a file or directory of the repository, and an #anchor on a link to
// a Markdown file (or on a link within the page) names one of its headings.
func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	files := markdown(t, r)
	if len(files) < 2 {
		t.Fatalf("found %d Markdown files under %s: the walk looks wrong", len(files), r)
	}
	headings := map[string]map[string]bool{} // file → its anchors
	anchorsOf := func(p string) map[string]bool {
		if headings[p] == nil {
			headings[p] = anchors(read(t, p))
		}
		return headings[p]
	}
	checked := 0
	for _, f := range files {
		prose := inlineCode.ReplaceAllString(fenced.ReplaceAllString(read(t, f), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := f
			if target != "" {
				p = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
				rel, _ := filepath.Rel(r, p)
				if strings.HasPrefix(rel, "..") {
					t.Errorf("%s links %s, outside the repository", f, m[1])
					continue
				}
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s links %s, which does not exist", f, m[1])
					continue
				}
			}
			checked++
			if anchor != "" && strings.HasSuffix(p, ".md") && !anchorsOf(p)[anchor] {
				t.Errorf("%s links %s: %s has no heading with anchor #%s", f, m[1], filepath.Base(p), anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked: the link pattern looks wrong")
	}
}

// The README stays short (at most 12 KB), and its package map names every
// public package at the top of the module (one with Go files that is not
// internal, cmd, examples, integration, deploy or scripts).
func TestREADMEPackageMap(t *testing.T) {
	dir := root(t)
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 12<<10 {
		t.Errorf("README.md is %d bytes; keep it within %d", len(b), 12<<10)
	}
	_, after, ok := strings.Cut(string(b), "\n## Packages\n")
	if !ok {
		t.Fatal("README.md has no ## Packages section")
	}
	section, _, _ := strings.Cut(after, "\n## ")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"internal": true, "cmd": true, "examples": true, "integration": true, "deploy": true, "scripts": true, "docs": true}
	for _, e := range entries {
		if !e.IsDir() || skip[e.Name()] || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		gos, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.go"))
		if len(gos) == 0 {
			continue
		}
		if !strings.Contains(section, "`"+e.Name()+"`") {
			t.Errorf("README's package map does not name package %s", e.Name())
		}
	}
}
