package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// need skips the test for why, or fails it when MCPQ_REQUIRE_DOCKER=1 (as
// in CI, which installs the engine and the tools).
func need(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("MCPQ_REQUIRE_DOCKER") == "1" {
		t.Fatal(why + " (and MCPQ_REQUIRE_DOCKER=1)")
	}
	t.Skip(why)
}

// HAProxy and Prometheus read their configs as the compose file gives them:
// each tool accepts its config, and rejects the same config with one bad
// line, so a tool that accepted anything would fail here.
func TestConfigsByTheirTools(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct {
		tool, pkg, config, bad string
		args                   []string
	}{
		{"haproxy", "haproxy", "haproxy.cfg", "    no-such-keyword on\n", []string{"-c", "-f"}},
		{"promtool", "prometheus", "prometheus.yml", "no_such_setting: 1\n", []string{"check", "config"}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			bin, err := exec.LookPath(c.tool)
			if err != nil {
				need(t, c.tool+" is not on PATH (Debian package "+c.pkg+")")
			}
			good, err := os.ReadFile(filepath.Join(root, "deploy", c.config))
			if err != nil {
				t.Fatal(err)
			}
			check := func(config []byte) ([]byte, error) {
				p := filepath.Join(t.TempDir(), c.config)
				if err := os.WriteFile(p, config, 0o644); err != nil {
					t.Fatal(err)
				}
				return exec.Command(bin, append(c.args, p)...).CombinedOutput()
			}
			if out, err := check(good); err != nil {
				t.Errorf("%s %v deploy/%s: %v\n%s", c.tool, c.args, c.config, err, out)
			}
			if out, err := check(append(good, c.bad...)); err == nil {
				t.Errorf("%s accepts deploy/%s with %q appended; it checks nothing\n%s", c.tool, c.config, c.bad, out)
			}
		})
	}
}
