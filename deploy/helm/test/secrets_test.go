package helmtest

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcpqueue/mcpqueue/internal/binflags"
)

// Broker credentials and certificates beyond the URL (issue #20): values
// nats.auth, nats.tls, redis.auth, redis.tls and redis.sentinel name Secrets
// the user manages; the chart mounts files from them and passes the rest as
// secretKeyRef variables, to the api and every pool.

// brokerSecretEnv are the variables that carry a broker credential or
// certificate; fileEnv those among them whose value is a file's path.
var (
	brokerSecretEnv = []string{
		"MCPQ_NATS_CREDS", "MCPQ_NATS_NKEY", "MCPQ_NATS_USER", "MCPQ_NATS_PASSWORD", "MCPQ_NATS_TOKEN",
		"MCPQ_NATS_TLS_CA", "MCPQ_NATS_TLS_CERT", "MCPQ_NATS_TLS_KEY",
		"MCPQ_REDIS_USER", "MCPQ_REDIS_PASSWORD", "MCPQ_REDIS_SENTINEL_USER", "MCPQ_REDIS_SENTINEL_PASSWORD",
		"MCPQ_REDIS_TLS_CA", "MCPQ_REDIS_TLS_CERT", "MCPQ_REDIS_TLS_KEY",
	}
	fileEnv = []string{
		"MCPQ_NATS_CREDS", "MCPQ_NATS_NKEY", "MCPQ_NATS_TLS_CA", "MCPQ_NATS_TLS_CERT", "MCPQ_NATS_TLS_KEY",
		"MCPQ_REDIS_TLS_CA", "MCPQ_REDIS_TLS_CERT", "MCPQ_REDIS_TLS_KEY",
	}
	// secretValued must never have a plain value in a pod spec.
	secretValued = []string{"MCPQ_STATE_KEY", "NATS_URL", "REDIS_URL"}
)

// secretRef is where a variable's value comes from: a key of a Secret, as
// the variable itself (secretKeyRef) or as a file mounted from it.
type secretRef struct {
	secret, key string
	file        bool
}

// brokerSecretRefs resolves each broker credential variable of d's
// container to the Secret key behind it: a secretKeyRef, or, for a file
// flag, the path through the container's volumeMounts to a Secret volume's
// item. A credential given as a plain value, or a file path no Secret backs,
// is an error.
func brokerSecretRefs(t *testing.T, d *appsv1.Deployment) map[string]secretRef {
	t.Helper()
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	out := map[string]secretRef{}
	for _, e := range c.Env {
		if !slices.Contains(brokerSecretEnv, e.Name) {
			continue
		}
		isFile := slices.Contains(fileEnv, e.Name)
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !isFile:
			out[e.Name] = secretRef{secret: e.ValueFrom.SecretKeyRef.Name, key: e.ValueFrom.SecretKeyRef.Key}
		case isFile && e.ValueFrom == nil && path.IsAbs(e.Value):
			ref, ok := secretFile(c, vols, e.Value)
			if !ok {
				t.Errorf("%s: %s=%s is no file of a Secret volume the container mounts", d.Name, e.Name, e.Value)
				continue
			}
			out[e.Name] = ref
		case isFile:
			t.Errorf("%s: %s must be the path of a file mounted from a Secret, is %+v", d.Name, e.Name, e)
		default:
			t.Errorf("%s: %s must come from a Secret (secretKeyRef), is the plain value %q", d.Name, e.Name, e.Value)
		}
	}
	return out
}

// secretFile finds the Secret key mounted at file p.
func secretFile(c corev1.Container, vols map[string]corev1.Volume, p string) (secretRef, bool) {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || m.SubPath != "" {
			continue
		}
		v, ok := vols[m.Name]
		if !ok || v.Secret == nil {
			continue
		}
		for _, it := range v.Secret.Items {
			if path.Clean(it.Path) == rel {
				return secretRef{secret: v.Secret.SecretName, key: it.Key, file: true}, true
			}
		}
		if len(v.Secret.Items) == 0 { // the whole Secret: each key a file
			return secretRef{secret: v.Secret.SecretName, key: rel, file: true}, true
		}
	}
	return secretRef{}, false
}

// checkSecretVolumes: nothing is writable but /tmp (an emptyDir); every
// Secret volume is mounted read-only, its files readable by the pod's
// non-root user and by nobody outside the pod's group. A Secret volume's
// files belong to root, so the user reads them only through the group:
// fsGroup (the kubelet gives the files that group, pkg/volume
// SetVolumeOwnership) with the group read bit.
func checkSecretVolumes(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		v := vols[m.Name]
		switch {
		case v.Secret != nil:
			if !m.ReadOnly {
				t.Errorf("%s: Secret volume %s mounted writable at %s", d.Name, m.Name, m.MountPath)
			}
		case v.EmptyDir != nil && m.MountPath == "/tmp":
		default:
			t.Errorf("%s: volume %s at %s: only /tmp (emptyDir) and read-only Secrets are mounted", d.Name, m.Name, m.MountPath)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		mode := int32(0o644) // the API's default
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		modes := map[string]int32{"(default)": mode}
		for _, it := range v.Secret.Items {
			if it.Mode != nil {
				modes[it.Path] = *it.Mode
			}
		}
		for f, m := range modes {
			if m&0o007 != 0 {
				t.Errorf("%s: Secret volume %s, %s: mode %#o lets every user read it", d.Name, v.Name, f, m)
			}
			if m&0o040 == 0 || pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil {
				t.Errorf("%s: Secret volume %s, %s: mode %#o, fsGroup %v: the files are root's, so the non-root user needs fsGroup and the group read bit",
					d.Name, v.Name, f, m, pod.SecurityContext.FSGroup)
			}
		}
	}
}

// want is what each values file's pods take from the user's Secrets.
var brokerSecretsWant = map[string]map[string]secretRef{
	"nats-secure": {
		"MCPQ_NATS_CREDS":    {"mcpq-nats-creds", "worker.creds", true},
		"MCPQ_NATS_TLS_CA":   {"mcpq-nats-client-tls", "ca.crt", true},
		"MCPQ_NATS_TLS_CERT": {"mcpq-nats-client-tls", "tls.crt", true},
		"MCPQ_NATS_TLS_KEY":  {"mcpq-nats-client-tls", "tls.key", true},
	},
	"redis-sentinel": {
		"MCPQ_REDIS_USER":              {"mcpq-redis-acl", "username", false},
		"MCPQ_REDIS_PASSWORD":          {"mcpq-redis-acl", "password", false},
		"MCPQ_REDIS_SENTINEL_PASSWORD": {"mcpq-redis-sentinel", "sentinel-password", false},
		"MCPQ_REDIS_TLS_CA":            {"mcpq-redis-ca", "ca.pem", true},
	},
}

// Every values file: the api and every pool take exactly the credentials
// and certificates the file names, each from its Secret's key (files
// mounted read-only, the variable naming the mounted path), no secret in a
// plain value; every such variable is a flag of the binary (-h); without
// any (every other file, defaults among them) the pods are what they were:
// /tmp their only volume, no fsGroup added. The triggers reach the broker
// with the same Secrets (checkTriggers, checkRedisAuth).
func TestBrokerSecrets(t *testing.T) {
	b, _ := builtBinaries(t)
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			want := brokerSecretsWant[name]
			checkBrokerSecrets(t, r, b, want)
			if len(want) == 0 {
				for _, d := range r.deployments(t) {
					pod := d.Spec.Template.Spec
					if len(pod.Volumes) != 1 || pod.Volumes[0].Name != "tmp" {
						t.Errorf("%s: volumes %v; without broker Secrets only tmp", d.Name, pod.Volumes)
					}
					if fs := pod.SecurityContext.FSGroup; fs != nil && dig(r.values, "podSecurityContext", "fsGroup") == nil {
						t.Errorf("%s: fsGroup %d added without broker files to read", d.Name, *fs)
					}
				}
			}
		})
	}
	// The plain settings around them.
	r := render(t, "redis-sentinel")
	for _, d := range r.deployments(t) {
		env := envOf(d.Spec.Template.Spec.Containers[0])
		for k, v := range map[string]string{
			"MCPQ_REDIS_SENTINELS":     "redis-node-0.redis-headless.data:26379,redis-node-1.redis-headless.data:26379,redis-node-2.redis-headless.data:26379",
			"MCPQ_REDIS_MASTER":        "mymaster",
			"MCPQ_REDIS_WAIT_REPLICAS": "1",
			"MCPQ_REDIS_WAIT_TIMEOUT":  "2s",
		} {
			if env[k].Value != v {
				t.Errorf("%s: %s=%q, want %q", d.Name, k, env[k].Value, v)
			}
		}
	}
	if n := len(r.of("TriggerAuthentication")); n != 1 {
		t.Errorf("redis-sentinel: %d TriggerAuthentications, want 1", n)
	}
	r = render(t, "nats-secure")
	for _, so := range r.of("ScaledObject") {
		for _, tr := range dig(so.Object, "spec", "triggers").([]any) {
			if md := tr.(map[string]any)["metadata"].(map[string]any); md["useHttps"] != "true" {
				t.Errorf("%s: useHttps %v", so.GetName(), md["useHttps"])
			}
		}
	}
}

// checkBrokerSecrets holds every Deployment of r to want (see TestBrokerSecrets).
func checkBrokerSecrets(t *testing.T, r *rendered, b map[string]*binflags.Binary, want map[string]secretRef) {
	t.Helper()
	// Values of the release's own Secrets: none may appear in a pod spec.
	var secretValues []string
	for _, s := range r.of("Secret") {
		for _, v := range dig(s.Object, "stringData").(map[string]any) {
			if v := fmt.Sprint(v); len(v) >= 4 {
				secretValues = append(secretValues, v)
			}
		}
	}
	deps := r.deployments(t)
	if len(deps) < 2 {
		t.Fatalf("%d Deployments", len(deps))
	}
	byName := map[string]*appsv1.Deployment{}
	for _, d := range deps {
		byName[d.Name] = d
		c := d.Spec.Template.Spec.Containers[0]
		got := brokerSecretRefs(t, d)
		if !maps.Equal(got, want) {
			t.Errorf("%s: from Secrets\n got  %v\n want %v", d.Name, got, want)
		}
		bin := b[component(d)]
		for _, e := range c.Env {
			if _, isFlag := bin.ByEnv[e.Name]; slices.Contains(brokerSecretEnv, e.Name) && !isFlag {
				t.Errorf("%s: %s is no flag's variable in %s -h", d.Name, e.Name, component(d))
			}
			if slices.Contains(secretValued, e.Name) && e.ValueFrom == nil {
				t.Errorf("%s: %s is a plain value", d.Name, e.Name)
			}
			for _, sv := range secretValues {
				if e.Value != "" && strings.Contains(e.Value, sv) {
					t.Errorf("%s: %s carries a value of the release's Secret in plain text", d.Name, e.Name)
				}
			}
		}
		checkSecretVolumes(t, d)
	}
	for _, so := range r.of("ScaledObject") {
		d := byName[str(so.Object, "spec", "scaleTargetRef", "name")]
		if d == nil {
			t.Errorf("ScaledObject %s scales no Deployment of the release", so.GetName())
			continue
		}
		checkTriggers(t, r, so.Object, d)
	}
}

// The other ways and their refusals, on values given inline: each renders
// what it names (and the binaries take every variable: checkPod), or fails
// with a message naming the values to fix.
func TestBrokerSecretVariants(t *testing.T) {
	b, _ := builtBinaries(t)
	pool := "pools: [{name: default, tools: [render_report], autoscaling: {enabled: true}}]\n"
	for _, tc := range []struct {
		name, values string
		want         map[string]secretRef
		fsGroup      int64
	}{
		{"nats nkey", "nats: {auth: {nkey: {secretName: s-nkey}}}", map[string]secretRef{
			"MCPQ_NATS_NKEY": {"s-nkey", "nkey.seed", true}}, 65532},
		{"nats user and password", "nats: {auth: {userPassword: {secretName: s-up}}}", map[string]secretRef{
			"MCPQ_NATS_USER": {"s-up", "username", false}, "MCPQ_NATS_PASSWORD": {"s-up", "password", false}}, 0},
		{"nats token, CA only", "nats: {auth: {token: {secretName: s-tok, key: t}}, tls: {secretName: s-ca}}", map[string]secretRef{
			"MCPQ_NATS_TOKEN": {"s-tok", "t", false}, "MCPQ_NATS_TLS_CA": {"s-ca", "ca.crt", true}}, 65532},
		{"fsGroup of the values kept", "podSecurityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true, fsGroup: 2000}\nnats: {auth: {creds: {secretName: c}}}", map[string]secretRef{
			"MCPQ_NATS_CREDS": {"c", "nats.creds", true}}, 2000},
		{"fsGroup from runAsGroup", "podSecurityContext: {runAsUser: 1000, runAsGroup: 1001, runAsNonRoot: true}\nnats: {auth: {creds: {secretName: c}}}", map[string]secretRef{
			"MCPQ_NATS_CREDS": {"c", "nats.creds", true}}, 1001},
		{"redis settings ignored on nats", "redis: {auth: {secretName: r}, tls: {secretName: rt}, sentinel: {masterName: m, addresses: [s:26379]}}", map[string]secretRef{}, 0},
		{"redis password and client certificate", "broker: asynq\nredis: {url: 'rediss://redis:6380/0', auth: {secretName: s-r}, tls: {secretName: s-rt, caKey: '', clientCert: true}}\n" + pool, map[string]secretRef{
			"MCPQ_REDIS_PASSWORD": {"s-r", "password", false},
			"MCPQ_REDIS_TLS_CERT": {"s-rt", "tls.crt", true}, "MCPQ_REDIS_TLS_KEY": {"s-rt", "tls.key", true}}, 65532},
		{"redis sentinel user, existing secret", "broker: asynq\nsecret: {existingSecret: mine}\nredis: {sentinel: {masterName: m, addresses: ['s0:26379', 's1:26379'], auth: {secretName: s-s, userKey: u, passwordKey: p}}}\n" + pool, map[string]secretRef{
			"MCPQ_REDIS_SENTINEL_USER": {"s-s", "u", false}, "MCPQ_REDIS_SENTINEL_PASSWORD": {"s-s", "p", false}}, 0},
		{"redis password for KEDA only, as before", "broker: asynq\nredis: {url: 'redis://:hunter2@redis:6379/0', passwordInSecret: true}\nsecret: {redisPassword: hunter2}\n" + pool, map[string]secretRef{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderInline(t, noAuth+tc.values)
			if err != nil {
				t.Fatal(err)
			}
			checkBrokerSecrets(t, r, b, tc.want)
			for _, d := range r.deployments(t) {
				checkPod(t, d, b[component(d)], r.secretKeys())
				var fs int64
				if p := d.Spec.Template.Spec.SecurityContext.FSGroup; p != nil {
					fs = *p
				}
				if fs != tc.fsGroup {
					t.Errorf("%s: fsGroup %d, want %d", d.Name, fs, tc.fsGroup)
				}
			}
		})
	}
	for _, tc := range []struct{ name, values, err string }{
		{"two NATS ways", "nats: {auth: {creds: {secretName: a}, token: {secretName: b}}}", "nats.auth.creds and nats.auth.token exclude each other"},
		{"NATS TLS with nothing to mount", "nats: {tls: {secretName: a, caKey: ''}}", "nothing to mount"},
		{"client certificate without key", "nats: {tls: {secretName: a, clientCert: true, keyKey: ''}}", "nats.tls.clientCert needs"},
		{"Redis TLS on redis://", "broker: asynq\nredis: {tls: {secretName: a}}", "redis.tls needs a rediss://"},
		{"Sentinel master alone", "broker: asynq\nredis: {sentinel: {masterName: m}}", "go together"},
		{"Sentinels twice", "broker: asynq\nredis: {url: 'redis+sentinel://s:26379/m', sentinel: {masterName: m, addresses: ['s:26379']}}", "give them once"},
		{"two KEDA passwords", "broker: asynq\nredis: {passwordInSecret: true, auth: {secretName: a}}", "drop redis.passwordInSecret"},
		{"Redis auth without keys", "broker: asynq\nredis: {auth: {secretName: a, passwordKey: ''}}", "redis.auth.secretName needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderInline(t, noAuth+tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("render: %v; want an error with %q", err, tc.err)
			}
		})
	}
}

// noAuth is the values line that lets the chart render without authentication.
const noAuth = "api: {auth: {disabled: true}}\n"

func renderInline(t *testing.T, values string) (*rendered, error) {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	return renderValues(t, loadChart(t), t.Name(), "mcpq-test", v, nil)
}
