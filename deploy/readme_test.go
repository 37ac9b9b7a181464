package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"testing"
)

// Every flag of api and worker is in one of the README's tables (the
// first cell of a row names it), with the environment variable the binary
// reads for it in the row: the README is where operators look them up.
func TestREADMEListsEveryFlag(t *testing.T) {
	b := builtBinaries(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| (`--[^|]*)\\|([^|]*)\\|").FindAllSubmatch(raw, -1)
	flagName := regexp.MustCompile("`--([a-z0-9-]+)`")
	envName := regexp.MustCompile("`([A-Z][A-Z0-9_]+)")
	documented := map[string][]string{} // flag → env names in its row
	for _, r := range rows {
		var envs []string
		for _, m := range envName.FindAllSubmatch(r[2], -1) {
			envs = append(envs, string(m[1]))
		}
		for _, m := range flagName.FindAllSubmatch(r[1], -1) {
			documented[string(m[1])] = append(documented[string(m[1])], envs...)
		}
	}
	var missing []string
	for _, name := range []string{"api", "worker"} {
		for env, f := range b[name].ByEnv {
			envs, ok := documented[f.Name]
			switch {
			case !ok:
				missing = append(missing, name+": --"+f.Name+" has no README row")
			case !slices.Contains(envs, env):
				missing = append(missing, name+": the README row of --"+f.Name+" does not name "+env)
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
}
