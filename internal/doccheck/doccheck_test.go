// Package doccheck_test holds the documentation to what the repository
// builds: the README's worker code is the example module's main.go, which
// the integration tests build and run, and every relative link in the
// README and docs/ resolves to a file of the repository.
package doccheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// Code is not prose: fenced blocks and inline code spans hold no links.
	fenced     = regexp.MustCompile("(?s)```.*?```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
)

// Every relative link of the README and of docs/*.md names a file or
// directory of the repository (anchors aside).
func TestRelativeLinksResolve(t *testing.T) {
	r := root(t)
	files := []string{filepath.Join(r, "README.md")}
	err := filepath.WalkDir(filepath.Join(r, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		prose := inlineCode.ReplaceAllString(fenced.ReplaceAllString(read(t, f), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
			rel, _ := filepath.Rel(r, p)
			if strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", f, m[1])
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links %s, which does not exist", f, m[1])
			}
		}
	}
}
