package helmtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcpqueue/mcpqueue/internal/binflags"
)

// pendingFlags are variables the chart sets that the binaries do not read
// yet, each with the issue that adds it. Remove a name once its flag exists:
// the check then holds it like every other.
var pendingFlags = map[string]map[string]string{}

var (
	binsOnce sync.Once
	bins     map[string]*binflags.Binary
	binsDir  string
	binsErr  error
)

// builtBinaries builds ./cmd/api and ./cmd/worker of the repository once and
// reads their -h.
func builtBinaries(t *testing.T) (map[string]*binflags.Binary, string) {
	t.Helper()
	binsOnce.Do(func() {
		binsDir, binsErr = os.MkdirTemp("", "mcpq-helm-bins-")
		if binsErr == nil {
			bins, binsErr = binflags.Build(repoRoot(), binsDir, "./cmd/api", "./cmd/worker")
		}
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins, binsDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binsDir != "" {
		_ = os.RemoveAll(binsDir)
	}
	os.Exit(code)
}

// Every values file renders, and every Deployment's container passes the
// checks a cluster cannot make: each variable is one its binary reads, with
// a value it accepts; the listen and admin addresses are the container's
// ports; the probes reach the admin port on the paths the binaries serve;
// the pods run as a numeric non-root user with nothing writable but /tmp and
// no privileges; the kubelet waits longer than the process drains.
func TestChartContainers(t *testing.T) {
	b, _ := builtBinaries(t)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			secrets := r.secretKeys()
			deps := r.deployments(t)
			if len(deps) < 2 {
				t.Fatalf("%d Deployments; want the api and at least one pool", len(deps))
			}
			for _, d := range deps {
				bin := b[component(d)]
				if bin == nil {
					t.Fatalf("Deployment %s: component %q runs no binary this test knows", d.Name, component(d))
				}
				checkPod(t, d, bin, secrets)
			}
		})
	}
}

// secretKeys is what the release's Secrets hold, by Secret name; a Secret the
// release only names (secret.existingSecret) is not there.
func (r *rendered) secretKeys() map[string][]string {
	out := map[string][]string{}
	for _, s := range r.of("Secret") {
		sd, _ := s.Object["stringData"].(map[string]any)
		for k := range sd {
			out[s.GetName()] = append(out[s.GetName()], k)
		}
	}
	return out
}

func checkPod(t *testing.T, d *appsv1.Deployment, bin *binflags.Binary, secrets map[string][]string) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Name, len(pod.Containers))
	}
	c := pod.Containers[0]
	env := envOf(c)
	comp := component(d)
	for _, e := range c.Env {
		if why, ok := pendingFlags[comp][e.Name]; ok {
			t.Logf("%s: %s is not a flag of %s yet (%s)", d.Name, e.Name, comp, why)
			continue
		}
		if !bin.ReadsEnv(e.Name) {
			t.Errorf("%s: the %s binary reads no environment variable %s (no flag names it in -h, no code reads it)", d.Name, comp, e.Name)
			continue
		}
		if f, ok := bin.ByEnv[e.Name]; ok && e.ValueFrom == nil {
			if why := f.ValueError(e.Value); why != "" {
				t.Errorf("%s: %s=%q (flag --%s of %s) %s", d.Name, e.Name, e.Value, f.Name, comp, why)
			}
		}
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			keys, ours := secrets[ref.SecretKeyRef.Name]
			if ours && !slices.Contains(keys, ref.SecretKeyRef.Key) {
				t.Errorf("%s: %s reads key %s of Secret %s, which holds %v", d.Name, e.Name, ref.SecretKeyRef.Key, ref.SecretKeyRef.Name, keys)
			}
		}
	}

	// Ports: the addresses the binaries listen on are the container's ports.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	addrs := map[string]string{"admin": "MCPQ_ADMIN"}
	if comp == "api" {
		addrs["http"] = "MCPQ_LISTEN"
	}
	for port, v := range addrs {
		_, p, err := net.SplitHostPort(env[v].Value)
		n, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			t.Errorf("%s: %s=%q is not host:port", d.Name, v, env[v].Value)
			continue
		}
		if ports[port] != int32(n) {
			t.Errorf("%s: %s listens on %d, but container port %q is %d", d.Name, v, n, port, ports[port])
		}
	}
	if len(c.Ports) != len(addrs) {
		t.Errorf("%s: container ports %v; want exactly %v", d.Name, c.Ports, addrs)
	}

	// Probes: on the admin listener, the paths both binaries serve there.
	for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz"}[kind]
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", d.Name, kind)
			continue
		}
		if p.HTTPGet.Path != want {
			t.Errorf("%s: %s probe on %s, want %s", d.Name, kind, p.HTTPGet.Path, want)
		}
		if n := probePort(p.HTTPGet.Port, ports); n != ports["admin"] {
			t.Errorf("%s: %s probe on port %s (%d), want the admin port %d (%s)", d.Name, kind, p.HTTPGet.Port.String(), n, ports["admin"], env["MCPQ_ADMIN"].Value)
		}
	}

	// Security.
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.RunAsGroup == nil || *psc.RunAsGroup == 0:
		t.Errorf("%s: the pod needs a numeric non-root runAsUser and runAsGroup", d.Name)
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("%s: runAsNonRoot is not set", d.Name)
	}
	switch {
	case sc == nil:
		t.Errorf("%s: no container securityContext", d.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: the root filesystem is writable", d.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: privilege escalation is allowed", d.Name)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities %v; drop ALL, add none", d.Name, sc.Capabilities)
	}
	checkSecretVolumes(t, d)

	// The kubelet's SIGKILL must come after the process has drained.
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	drain := durationEnv(t, d, env, "MCPQ_SHUTDOWN_GRACE", 25*time.Second) // the worker's default
	if comp == "api" {
		drain = durationEnv(t, d, env, "MCPQ_SHUTDOWN_DELAY", 5*time.Second) + durationEnv(t, d, env, "MCPQ_SHUTDOWN_TIMEOUT", 20*time.Second)
	}
	if grace <= drain {
		t.Errorf("%s: terminationGracePeriodSeconds %s does not exceed the shutdown it allows the process (%s)", d.Name, grace, drain)
	}
}

func probePort(p intstr.IntOrString, ports map[string]int32) int32 {
	if p.Type == intstr.String {
		return ports[p.StrVal]
	}
	return p.IntVal
}

func durationEnv(t *testing.T, d *appsv1.Deployment, env map[string]corev1.EnvVar, k string, def time.Duration) time.Duration {
	t.Helper()
	e, ok := env[k]
	if !ok {
		return def
	}
	v, err := time.ParseDuration(e.Value)
	if err != nil {
		t.Errorf("%s: %s=%q: %v", d.Name, k, e.Value, err)
	}
	return v
}

// Each pool is one Deployment with one ScaledObject when autoscaled; the
// ScaledObject scales exactly that Deployment, with one trigger per tool the
// Deployment hands its worker (MCPQ_TOOLS), aimed at that tool's consumer
// (NATS) or queue gauges (Prometheus) — on Asynq one trigger on the pending
// list of the pool the Deployment's workers belong to (MCPQ_POOL) — as the
// naming contract computes them from the prefix the pods get (MCPQ_PREFIX).
func TestPoolsAndTriggers(t *testing.T) {
	for name, want := range map[string]int{"nats-two-pools": 2, "asynq-prometheus": 2, "existing-secret": 1} {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			var workers []*appsv1.Deployment
			for _, d := range r.deployments(t) {
				if component(d) == "worker" {
					workers = append(workers, d)
				}
			}
			sos := r.of("ScaledObject")
			if len(workers) != want || len(sos) != want {
				t.Fatalf("%d worker Deployments and %d ScaledObjects, want %d of each", len(workers), len(sos), want)
			}
			byName := map[string]*appsv1.Deployment{}
			for _, d := range workers {
				byName[d.Name] = d
				if d.Spec.Replicas != nil {
					t.Errorf("%s: replicas %d set on an autoscaled Deployment (KEDA's HPA owns it; every upgrade would reset it)", d.Name, *d.Spec.Replicas)
				}
			}
			scaled := map[string]bool{}
			for _, so := range sos {
				target := str(so.Object, "spec", "scaleTargetRef", "name")
				d := byName[target]
				if d == nil {
					t.Errorf("ScaledObject %s scales %q, which is no worker Deployment", so.GetName(), target)
					continue
				}
				if scaled[target] {
					t.Errorf("two ScaledObjects scale %s", target)
				}
				scaled[target] = true
				checkTriggers(t, r, so.Object, d)
			}
		})
	}
	// Without autoscaling no ScaledObject, and replicas as given.
	r := render(t, "defaults")
	if n := len(r.of("ScaledObject")); n != 0 {
		t.Errorf("defaults: %d ScaledObjects, want none", n)
	}
}

func checkTriggers(t *testing.T, r *rendered, so map[string]any, d *appsv1.Deployment) {
	t.Helper()
	env := envOf(d.Spec.Template.Spec.Containers[0])
	prefix, broker := env["MCPQ_PREFIX"].Value, env["MCPQ_BROKER"].Value
	tools := strings.Split(env["MCPQ_TOOLS"].Value, ",")
	pool := env["MCPQ_POOL"].Value
	if pool == "" || pool != d.Labels["mcpqueue.dev/pool"] {
		t.Errorf("%s: MCPQ_POOL %q; want the pool's name %q", d.Name, pool, d.Labels["mcpqueue.dev/pool"])
	}
	triggers, _ := dig(so, "spec", "triggers").([]any)
	trigger := r.values["autoscaling"].(map[string]any)["trigger"]
	if trigger != "prometheus" && broker == "asynq" {
		tools = []string{""} // one trigger: the pool's one queue
	}
	if len(triggers) != len(tools) {
		t.Fatalf("%s: %d triggers for tools %v", d.Name, len(triggers), tools)
	}
	for i, tool := range tools {
		tr := triggers[i].(map[string]any)
		md := map[string]string{}
		for k, v := range tr["metadata"].(map[string]any) {
			md[k] = fmt.Sprint(v)
		}
		typ := tr["type"].(string)
		checkScalerKeys(t, d.Name, typ, md, tr["authenticationRef"] != nil)
		switch {
		case trigger == "prometheus":
			sel := fmt.Sprintf("tool=%q", tool)
			if typ != "prometheus" || !strings.Contains(md["query"], "mcpq_queue_pending{") || !strings.Contains(md["query"], "mcpq_queue_inflight{") ||
				strings.Count(md["query"], sel) != 2 {
				t.Errorf("%s: trigger %d (%s): query %q; want mcpq_queue_pending and mcpq_queue_inflight of %s", d.Name, i, typ, md["query"], sel)
			}
		case broker == "nats":
			if typ != "nats-jetstream" || md["stream"] != streamName(prefix) || md["consumer"] != consumerName(tool) {
				t.Errorf("%s: trigger %d: %s on stream %q consumer %q; tool %s's consumer is %s on %s",
					d.Name, i, typ, md["stream"], md["consumer"], tool, consumerName(tool), streamName(prefix))
			}
		case broker == "asynq":
			want := "redis"
			if env["MCPQ_REDIS_SENTINELS"].Value != "" {
				want = "redis-sentinel" // the pods find the primary through Sentinel: so must KEDA
				if md["addresses"] != env["MCPQ_REDIS_SENTINELS"].Value || md["sentinelMaster"] != env["MCPQ_REDIS_MASTER"].Value {
					t.Errorf("%s: trigger %d: Sentinels %q master %q; the pods use %q master %q", d.Name, i, md["addresses"], md["sentinelMaster"],
						env["MCPQ_REDIS_SENTINELS"].Value, env["MCPQ_REDIS_MASTER"].Value)
				}
			}
			if typ != want || md["listName"] != asynqPendingList(prefix, pool) {
				t.Errorf("%s: trigger %d: %s on list %q; want %s on pool %s's pending list %s", d.Name, i, typ, md["listName"], want, pool, asynqPendingList(prefix, pool))
			}
			checkRedisAuth(t, r, d, tr, tr["metadata"].(map[string]any))
		default:
			t.Errorf("%s: broker %q", d.Name, broker)
		}
	}
}

// checkRedisAuth: a redis trigger reaches Redis the way the pods do. Every
// credential and certificate the pods take from a Secret (a secretKeyRef
// variable, or a file mounted from one) KEDA takes from the same Secret's
// same key, through the trigger's TriggerAuthentication, with TLS on when
// the pods use a CA or client certificate; and every parameter of that
// TriggerAuthentication is one KEDA's scaler reads from authParams.
func checkRedisAuth(t *testing.T, r *rendered, d *appsv1.Deployment, tr, md map[string]any) {
	t.Helper()
	typ := tr["type"].(string)
	params := map[string]secretRef{}
	if ref, _ := tr["authenticationRef"].(map[string]any); ref != nil {
		name, _ := ref["name"].(string)
		var ta *unstructured.Unstructured
		for _, o := range r.of("TriggerAuthentication") {
			if o.GetName() == name {
				ta = o
			}
		}
		if ta == nil {
			t.Errorf("%s: %s trigger authenticationRef %q: no such TriggerAuthentication in the release", d.Name, typ, name)
			return
		}
		refs, _ := dig(ta.Object, "spec", "secretTargetRef").([]any)
		for _, x := range refs {
			m := x.(map[string]any)
			p := fmt.Sprint(m["parameter"])
			if !scalers[typ].auth[p] {
				t.Errorf("%s: TriggerAuthentication %s parameter %q is no authentication parameter of KEDA's %s scaler", d.Name, name, p, typ)
			}
			if _, dup := params[p]; dup {
				t.Errorf("%s: TriggerAuthentication %s gives %q twice", d.Name, name, p)
			}
			params[p] = secretRef{secret: fmt.Sprint(m["name"]), key: fmt.Sprint(m["key"])}
		}
	}
	refs := brokerSecretRefs(t, d)
	for env, param := range map[string]string{
		"MCPQ_REDIS_USER": "username", "MCPQ_REDIS_PASSWORD": "password",
		"MCPQ_REDIS_TLS_CA": "ca", "MCPQ_REDIS_TLS_CERT": "cert", "MCPQ_REDIS_TLS_KEY": "key",
		"MCPQ_REDIS_SENTINEL_USER": "sentinelUsername", "MCPQ_REDIS_SENTINEL_PASSWORD": "sentinelPassword",
	} {
		pod, ok := refs[env]
		if !ok {
			continue
		}
		if got, ok := params[param]; !ok || got.secret != pod.secret || got.key != pod.key {
			t.Errorf("%s: the pods take %s from Secret %s key %s, KEDA's %s trigger %q from %+v", d.Name, env, pod.secret, pod.key, typ, param, got)
		}
	}
	_, ca := refs["MCPQ_REDIS_TLS_CA"]
	_, cert := refs["MCPQ_REDIS_TLS_CERT"]
	if (ca || cert) && fmt.Sprint(md["enableTLS"]) != "true" {
		t.Errorf("%s: the pods speak TLS to Redis, the %s trigger has enableTLS %v", d.Name, typ, md["enableTLS"])
	}
}

// kedaScaler is what KEDA's own source says a scaler reads: the metadata
// keys it knows and those it requires (no default, not optional).
type kedaScaler struct {
	known, auth        map[string]bool // auth: parameters a TriggerAuthentication may give
	required, fromAuth []string        // fromAuth: required keys an authenticationRef may supply instead
}

var kedaTag = regexp.MustCompile("keda:\"([^\"]*)\"")

// kedaScalers reads the scalers' metadata struct tags from the KEDA module's
// source (pkg/scalers/<file>), the version whose CRDs the cluster test installs.
func kedaScalers(t *testing.T) map[string]kedaScaler {
	t.Helper()
	dir := moduleDir(t, kedaModule)
	files := map[string]string{"nats-jetstream": "nats_jetstream_scaler.go", "redis": "redis_scaler.go", "redis-sentinel": "redis_scaler.go", "prometheus": "prometheus_scaler.go"}
	out := map[string]kedaScaler{}
	for typ, f := range files {
		src, err := os.ReadFile(filepath.Join(dir, "pkg", "scalers", f))
		if err != nil {
			t.Fatalf("KEDA scaler source: %v", err)
		}
		sc := kedaScaler{known: map[string]bool{}, auth: map[string]bool{}}
		for _, m := range kedaTag.FindAllStringSubmatch(string(src), -1) {
			var names []string
			var optional, metadata, auth bool
			for _, part := range strings.Split(m[1], ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
				switch k {
				case "name":
					names = strings.Split(v, ";")
				case "optional", "default":
					optional = true
				case "order":
					metadata = strings.Contains(v, "triggerMetadata")
					auth = strings.Contains(v, "authParams")
				}
			}
			for _, n := range names {
				if metadata {
					sc.known[n] = true
				}
				if auth {
					sc.auth[n] = true
				}
			}
			if !optional && metadata && len(names) == 1 {
				if auth {
					sc.fromAuth = append(sc.fromAuth, names[0])
				} else {
					sc.required = append(sc.required, names[0])
				}
			}
		}
		out[typ] = sc
	}
	return out
}

var (
	scalersOnce sync.Once
	scalers     map[string]kedaScaler
)

func checkScalerKeys(t *testing.T, who, typ string, md map[string]string, authRef bool) {
	t.Helper()
	scalersOnce.Do(func() { scalers = kedaScalers(t) })
	sc, ok := scalers[typ]
	if !ok {
		t.Errorf("%s: trigger type %q is not one this chart uses", who, typ)
		return
	}
	for k := range md {
		if !sc.known[k] {
			t.Errorf("%s: %s trigger metadata %q is no parameter of KEDA's %s scaler", who, typ, k, typ)
		}
	}
	for _, k := range sc.required {
		if md[k] == "" {
			t.Errorf("%s: %s trigger lacks %q, which KEDA's %s scaler requires", who, typ, k, typ)
		}
	}
	for _, k := range sc.fromAuth {
		if md[k] == "" && !authRef {
			t.Errorf("%s: %s trigger lacks %q (neither in metadata nor from an authenticationRef)", who, typ, k)
		}
	}
}

// dig walks nested maps.
func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func str(m map[string]any, path ...string) string {
	s, _ := dig(m, path...).(string)
	return s
}

// moduleDir is the module cache directory of module@version, downloaded
// through the Go module proxy if it is not there yet.
func moduleDir(t *testing.T, modVersion string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", modVersion).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", modVersion, err)
	}
	m := regexp.MustCompile(`"Dir": "([^"]+)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("go mod download %s: no Dir in %s", modVersion, out)
	}
	return string(m[1])
}
