package deploy_test

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v4"

	"github.com/mcpqueue/mcpqueue/internal/binflags"
)

var (
	binsOnce sync.Once
	bins     map[string]*binflags.Binary
	binsErr  error
)

// builtBinaries builds ./cmd/api and ./cmd/worker once and reads their -h.
func builtBinaries(t *testing.T) map[string]*binflags.Binary {
	t.Helper()
	binsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpq-deploy-")
		if err != nil {
			binsErr = err
			return
		}
		defer os.RemoveAll(dir)
		bins, binsErr = binflags.Build(repoRoot(t), dir, "./cmd/api", "./cmd/worker")
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins
}

// Every variable and flag the compose file hands api and worker is one the
// built binaries read, with a value they accept. Problems are reported one
// line each, naming the service, the variable or flag and the binary.
func TestComposeBinaryFlags(t *testing.T) {
	b := builtBinaries(t)
	p := mustLoad(t, "*")
	unknown := map[string][]string{} // "binary: variable or flag" → services
	for _, s := range p.Services {
		if s.Build == nil {
			continue
		}
		bin := b[s.Build.Target]
		if bin == nil {
			t.Errorf("%s: build target %s is not a binary this test knows", s.Name, s.Build.Target)
			continue
		}
		for k, v := range s.Environment {
			f, ok := bin.ByEnv[k]
			switch {
			case ok && v != nil:
				if why := f.ValueError(*v); why != "" {
					t.Errorf("%s: %s=%q (flag --%s of %s) %s", s.Name, k, *v, f.Name, s.Build.Target, why)
				}
			case !bin.ReadsEnv(k):
				key := fmt.Sprintf("the %s binary reads no environment variable %s (no flag names it in -h, no code reads it)", s.Build.Target, k)
				unknown[key] = append(unknown[key], s.Name)
			}
		}
		for _, arg := range s.Command {
			name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if strings.HasPrefix(arg, "-") && bin.Flags[name].Name == "" {
				key := fmt.Sprintf("the %s binary has no flag --%s", s.Build.Target, name)
				unknown[key] = append(unknown[key], s.Name)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(unknown)) {
		t.Errorf("%s; set on %s", k, strings.Join(slices.Sorted(slices.Values(unknown[k])), ", "))
	}
}

// The load balancer sends to exactly the api replicas of each profile, on
// the port they listen on, and checks their readiness.
func TestHAProxyUpstreams(t *testing.T) {
	cfg := readHAProxy(t)
	for name, l := range profiles {
		p := mustLoad(t, name)
		dns := dnsNames(t, p)
		var got []string
		for _, addr := range cfg.servers {
			host, port := splitHostPort(t, addr)
			svc, ok := dns[host]
			if !ok {
				t.Errorf("profile %s: haproxy.cfg sends to %s, which no service answers to", name, addr)
				continue
			}
			got = append(got, svc)
			if slices.Contains(l.apis, svc) {
				if want := envPort(t, p.Services[svc], "MCPQ_LISTEN"); port != want {
					t.Errorf("profile %s: haproxy.cfg sends to %s, but %s listens on %d", name, addr, svc, want)
				}
			}
		}
		if slices.Sort(got); !slices.Equal(got, l.apis) {
			t.Errorf("profile %s: haproxy.cfg sends to %v, want the api replicas %v", name, got, l.apis)
		}
		lb := p.Services["lb"]
		var published []int
		for _, port := range lb.Ports {
			published = append(published, int(port.Target))
		}
		if want := []int{cfg.bindPort, cfg.statsPort}; !slices.Equal(published, want) {
			t.Errorf("lb publishes %v; haproxy.cfg binds %d (frontend mcp) and %d (frontend stats)", lb.Ports, cfg.bindPort, cfg.statsPort)
		}
		if hc := lb.HealthCheck.Test; !strings.HasSuffix(hc[len(hc)-1], fmt.Sprintf(":%d%s", cfg.bindPort, cfg.monitorURI)) {
			t.Errorf("lb health check %v does not probe haproxy's monitor-uri %s on %d", hc, cfg.monitorURI, cfg.bindPort)
		}
	}
	if cfg.check != "GET /readyz" {
		t.Errorf("haproxy.cfg checks the replicas with %q, want GET /readyz", cfg.check)
	}
}

type haproxyCfg struct {
	servers           []string // host:port of the default backend's servers
	bindPort          int      // frontend mcp
	statsPort         int      // frontend stats (HAProxy's view of the replicas)
	monitorURI, check string
}

// readHAProxy reads deploy/haproxy.cfg: the frontend's bind port and
// default backend, and that backend's servers and health check.
func readHAProxy(t *testing.T) haproxyCfg {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][][]string{}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			cur = strings.Join(f, " ")
			continue
		}
		sections[cur] = append(sections[cur], f)
	}
	var c haproxyCfg
	var backend string
	for _, f := range sections["frontend mcp"] {
		switch f[0] {
		case "bind":
			_, port := splitHostPort(t, f[1])
			c.bindPort = port
		case "monitor-uri":
			c.monitorURI = f[1]
		case "default_backend":
			backend = f[1]
		}
	}
	for _, f := range sections["frontend stats"] {
		if f[0] == "bind" {
			_, c.statsPort = splitHostPort(t, f[1])
		}
	}
	for _, f := range sections["backend "+backend] {
		switch {
		case f[0] == "server" && len(f) >= 3:
			c.servers = append(c.servers, f[2])
		case f[0] == "option" && f[1] == "httpchk":
			c.check = strings.Join(f[2:], " ")
		}
	}
	if backend == "" || len(c.servers) == 0 {
		t.Fatalf("haproxy.cfg: no frontend mcp with a default_backend that has servers")
	}
	return c
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		t.Fatalf("%q is not host:port", addr)
	}
	return host, n
}

// Prometheus scrapes every api replica on its listen port and every worker
// on its admin port, in both profiles.
func TestPrometheusTargets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	for name, l := range profiles {
		p := mustLoad(t, name)
		dns := dnsNames(t, p)
		jobs := map[string]struct {
			services []string
			portVar  string
		}{"api": {l.apis, "MCPQ_LISTEN"}, "worker": {l.workers, "MCPQ_ADMIN"}}
		for _, sc := range cfg.ScrapeConfigs {
			job, ok := jobs[sc.JobName]
			if !ok {
				t.Errorf("prometheus.yml: job %s scrapes no binary of this system", sc.JobName)
				continue
			}
			if sc.MetricsPath != "/metrics" {
				t.Errorf("prometheus.yml: job %s scrapes %s, want /metrics", sc.JobName, sc.MetricsPath)
			}
			var got []string
			for _, st := range sc.StaticConfigs {
				for _, target := range st.Targets {
					host, port := splitHostPort(t, target)
					svc := dns[host]
					if !slices.Contains(job.services, svc) {
						t.Errorf("profile %s: job %s scrapes %s, which is none of %v", name, sc.JobName, target, job.services)
						continue
					}
					if want := envPort(t, p.Services[svc], job.portVar); port != want {
						t.Errorf("profile %s: job %s scrapes %s, but %s serves /metrics on %d (%s)", name, sc.JobName, target, svc, want, job.portVar)
					}
					got = append(got, svc)
				}
			}
			if slices.Sort(got); !slices.Equal(got, job.services) {
				t.Errorf("profile %s: job %s scrapes %v, want %v", name, sc.JobName, got, job.services)
			}
			delete(jobs, sc.JobName)
		}
		for job := range jobs {
			t.Errorf("prometheus.yml has no %s job", job)
		}
	}
}

// The three NATS nodes form one JetStream cluster from deploy/nats.conf,
// read by the nats-server code the image runs: each names itself, the
// routes name all three nodes, the store is on the node's volume, and the
// apps and health checks use the ports the config opens.
func TestNATSCluster(t *testing.T) {
	p := mustLoad(t, "nats")
	nodes := profiles["nats"].backend
	confPath := filepath.Join(repoRoot(t), "deploy", "nats.conf")
	var clientPort int
	for _, name := range nodes {
		s := p.Services[name]
		var mounted, dataDir string
		for _, v := range s.Volumes {
			switch {
			case v.Type == types.VolumeTypeBind && v.Source == confPath:
				mounted = v.Target
			case v.Type == types.VolumeTypeVolume:
				dataDir = v.Target
			}
		}
		if i := slices.Index(s.Command, "--config"); i < 0 || i+1 >= len(s.Command) || s.Command[i+1] != mounted {
			t.Errorf("%s: runs %v, but deploy/nats.conf is mounted at %q", name, s.Command, mounted)
		}
		for k, v := range s.Environment {
			if v != nil {
				t.Setenv(k, *v) // the container's environment, which the config reads
			}
		}
		opts, err := server.ProcessConfigFile(confPath)
		if err != nil {
			t.Fatalf("%s: nats.conf: %v", name, err)
		}
		if opts.ServerName != name {
			t.Errorf("%s: the config names the node %q", name, opts.ServerName)
		}
		var routes []string
		for _, r := range opts.Routes {
			if r.Port() != strconv.Itoa(opts.Cluster.Port) {
				t.Errorf("%s: route %s is not on the cluster port %d", name, r, opts.Cluster.Port)
			}
			routes = append(routes, r.Hostname())
		}
		if slices.Sort(routes); !slices.Equal(routes, nodes) || opts.Cluster.Name == "" {
			t.Errorf("%s: cluster %q routes to %v, want all of %v", name, opts.Cluster.Name, routes, nodes)
		}
		if !opts.JetStream || dataDir == "" || !strings.HasPrefix(opts.StoreDir, dataDir+"/") {
			t.Errorf("%s: JetStream %v with its store in %q; want it on the node's volume (%q)", name, opts.JetStream, opts.StoreDir, dataDir)
		}
		if hc := s.HealthCheck.Test; !strings.Contains(hc[len(hc)-1], fmt.Sprintf("127.0.0.1:%d/healthz", opts.HTTPPort)) {
			t.Errorf("%s: health check %v does not probe the monitoring port %d", name, hc, opts.HTTPPort)
		}
		clientPort = opts.Port
	}
	checkNATSURL(t, p, nodes, clientPort)
}

// checkNATSURL: the apps connect to every node on its client port.
func checkNATSURL(t *testing.T, p *types.Project, nodes []string, port int) {
	t.Helper()
	for _, s := range p.Services {
		v := s.Environment["NATS_URL"]
		if s.Build == nil {
			continue
		}
		if v == nil {
			t.Errorf("%s: no NATS_URL", s.Name)
			continue
		}
		var hosts []string
		for _, u := range strings.Split(*v, ",") {
			pu, err := url.Parse(u)
			if err != nil || pu.Scheme != "nats" || pu.Port() != strconv.Itoa(port) {
				t.Errorf("%s: NATS_URL entry %q is not nats://node:%d", s.Name, u, port)
				continue
			}
			hosts = append(hosts, pu.Hostname())
		}
		if slices.Sort(hosts); !slices.Equal(hosts, nodes) {
			t.Errorf("%s: NATS_URL names %v, want every node %v", s.Name, hosts, nodes)
		}
	}
}

// Redis keeps an append-only file on its volume and never evicts keys.
func TestRedisDurability(t *testing.T) {
	s := mustLoad(t, "asynq").Services["redis"]
	if len(s.Command) == 0 || s.Command[0] != "redis-server" {
		t.Fatalf("redis runs %v, want redis-server with its settings as arguments", s.Command)
	}
	conf := map[string]string{}
	for i := 1; i+1 < len(s.Command); i += 2 {
		conf[strings.TrimPrefix(s.Command[i], "--")] = s.Command[i+1]
	}
	for k, want := range map[string]string{"appendonly": "yes", "maxmemory-policy": "noeviction"} {
		if conf[k] != want {
			t.Errorf("redis: %s is %q, want %s", k, conf[k], want)
		}
	}
	if f := conf["appendfsync"]; f != "everysec" && f != "always" {
		t.Errorf("redis: appendfsync %q, want everysec or always", f)
	}
	if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == "/data"
	}) {
		t.Error("redis: /data (where the append-only file goes) is not on a volume")
	}
}
