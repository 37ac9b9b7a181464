package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var (
	flagRow  = regexp.MustCompile("(?m)^\\| (`--[^|]*)\\|([^|]*)\\|")
	flagName = regexp.MustCompile("`--([a-z0-9-]+)`")
	envName  = regexp.MustCompile("`([A-Z][A-Z0-9_]+)")
)

// flagRows reads the flag rows of a Markdown file's tables (the first cell
// names a flag): flag → the environment variables named in the row's second
// cell.
func flagRows(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, r := range flagRow.FindAllSubmatch(raw, -1) {
		var envs []string
		for _, m := range envName.FindAllSubmatch(r[2], -1) {
			envs = append(envs, string(m[1]))
		}
		for _, m := range flagName.FindAllSubmatch(r[1], -1) {
			documented[string(m[1])] = append(documented[string(m[1])], envs...)
		}
	}
	return documented
}

// Every flag of api and worker has a row in docs/configuration.md (the first
// cell of a row names it), with the environment variable the binary reads
// for it in the row: that page is where operators look them up. The other
// pages' flag rows (durability, console, tracing, …) name the same variable.
func TestConfigurationListsEveryFlag(t *testing.T) {
	b := builtBinaries(t)
	docs := filepath.Join(repoRoot(t), "docs")
	config := flagRows(t, filepath.Join(docs, "configuration.md"))
	pages, err := filepath.Glob(filepath.Join(docs, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot(t), "README.md"))
	var missing []string
	for _, name := range []string{"api", "worker"} {
		for env, f := range b[name].ByEnv {
			envs, ok := config[f.Name]
			switch {
			case !ok:
				missing = append(missing, name+": --"+f.Name+" has no row in docs/configuration.md")
			case !slices.Contains(envs, env):
				missing = append(missing, name+": the docs/configuration.md row of --"+f.Name+" does not name "+env)
			}
			for _, p := range pages {
				if strings.HasSuffix(p, "configuration.md") {
					continue
				}
				if envs, ok := flagRows(t, p)[f.Name]; ok && !slices.Contains(envs, env) {
					missing = append(missing, name+": the "+filepath.Base(p)+" row of --"+f.Name+" does not name "+env)
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range slices.Compact(missing) {
		t.Error(m)
	}
}
