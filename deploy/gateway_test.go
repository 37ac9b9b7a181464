package deploy_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/mcpqueue/mcpqueue/bridge"
)

// loadGateway reads docker-compose.yml with deploy/compose.gateway.yml on
// top, as `docker compose -f … -f … --profile nats config` does.
func loadGateway(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	root := repoRoot(t)
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml"), filepath.Join(root, "deploy", "compose.gateway.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(list), cli.WithProfiles([]string{"nats"}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return opts.LoadProject(ctx)
}

// The gateway example: a remote MCP server and a worker relaying it, whose
// settings the worker binary reads and whose --mcp-config file the bridge
// loads, pointing at the remote server's service and port.
func TestComposeGatewayExample(t *testing.T) {
	if _, err := loadGateway(t, testEnv); err == nil || !strings.Contains(err.Error(), "REMOTE_MCP_TOKEN") {
		t.Fatalf("without REMOTE_MCP_TOKEN: %v, want an error naming it", err)
	}
	env := map[string]string{"REMOTE_MCP_TOKEN": "compose-test-token"}
	for k, v := range testEnv {
		env[k] = v
	}
	p, err := loadGateway(t, env)
	if err != nil {
		t.Fatalf("docker compose -f docker-compose.yml -f deploy/compose.gateway.yml --profile nats config: %v", err)
	}
	gw, err := p.GetService("gateway-worker")
	if err != nil {
		t.Fatal(err)
	}
	remote, err := p.GetService("remote-mcp")
	if err != nil {
		t.Fatal(err)
	}
	worker := builtBinaries(t)["worker"]
	for k, v := range gw.Environment {
		if f, ok := worker.ByEnv[k]; ok && v != nil {
			if why := f.ValueError(*v); why != "" {
				t.Errorf("gateway-worker: %s=%q (flag --%s) %s", k, *v, f.Name, why)
			}
		} else if k != "REMOTE_MCP_TOKEN" {
			t.Errorf("gateway-worker: the worker binary reads no %s", k)
		}
	}
	for dep := range gw.DependsOn {
		if _, err := p.GetService(dep); err != nil {
			t.Errorf("gateway-worker depends on %s: %v", dep, err)
		}
	}

	cfgPath := *gw.Environment["MCPQ_MCP_CONFIG"]
	var source string
	for _, v := range gw.Volumes {
		if v.Target == cfgPath {
			source = v.Source
		}
	}
	if source == "" {
		t.Fatalf("MCPQ_MCP_CONFIG %s is not mounted into gateway-worker", cfgPath)
	}
	t.Setenv("REMOTE_MCP_TOKEN", "compose-test-token")
	servers, err := bridge.LoadConfig(source)
	if err != nil {
		t.Fatalf("the gateway's --mcp-config %s: %v", source, err)
	}
	if len(servers) != 1 || servers[0].HTTP.Headers["Authorization"] != "Bearer compose-test-token" {
		t.Fatalf("servers %+v: want the remote one, with the token from the environment", servers)
	}
	u, err := url.Parse(servers[0].HTTP.URL)
	if err != nil || u.Hostname() != remote.Name || remote.Environment["PORT"] == nil || u.Port() != *remote.Environment["PORT"] {
		t.Fatalf("the gateway relays %s, but the remote server is %s on port %v", servers[0].HTTP.URL, remote.Name, remote.Environment["PORT"])
	}
}
