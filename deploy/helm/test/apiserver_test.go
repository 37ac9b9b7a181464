package helmtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const fieldOwner = "mcpqueue-helm-test"

// Every object of every values file is accepted by a real kube-apiserver
// (with etcd) under server-side apply with dry run and strict field
// validation: the built-in kinds' schemas and admission defaults, and the
// CRD schemas of KEDA (ScaledObject, TriggerAuthentication) and
// prometheus-operator (ServiceMonitor). Rendering goes through the cluster,
// so the Secret's lookup runs too: a state key already in the cluster is
// kept by the next render, as an upgrade must keep it.
//
// scripts/k8s-test.sh provides the binaries (TEST_ASSET_KUBE_APISERVER,
// TEST_ASSET_ETCD); without them the test skips, unless MCPQ_REQUIRE_K8S=1.
func TestServerSideDryRun(t *testing.T) {
	if os.Getenv("TEST_ASSET_KUBE_APISERVER") == "" || os.Getenv("TEST_ASSET_ETCD") == "" {
		if os.Getenv("MCPQ_REQUIRE_K8S") == "1" {
			t.Fatal("TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD are not set: run scripts/k8s-test.sh")
		}
		t.Skip("no kube-apiserver: run scripts/k8s-test.sh")
	}
	env := &envtest.Environment{
		CRDInstallOptions:        envtest.CRDInstallOptions{Paths: crdPaths(t), ErrorIfPathMissing: true},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	t.Logf("kube-apiserver and etcd up in %s, %d CRDs installed", time.Since(start).Round(time.Millisecond), len(env.CRDs))
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ch := loadChart(t)

	// The dry run refuses what is wrong, so its passes mean something.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "control"}}); err != nil {
		t.Fatal(err)
	}
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"name": "bad", "namespace": "control"},
		"spec":     map[string]any{"scaleTargetRef": map[string]any{"name": "x"}, "triggers": []any{map[string]any{"type": "nats-jetstream"}}, "minReplicaCont": int64(0)},
	}}
	if err := dryRunApply(ctx, c, bad); err == nil || !strings.Contains(err.Error(), "minReplicaCont") {
		t.Errorf("a ScaledObject with an unknown field passed the dry run (%v): the check would prove nothing", err)
	}

	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			ns := "mcpq-" + name
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			r, err := renderValues(t, ch, name, ns, readValues(t, name), cfg)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			kinds := map[string]int{}
			for _, o := range r.objects {
				o.SetNamespace(ns)
				if err := dryRunApply(ctx, c, o); err != nil {
					t.Errorf("%s %s: refused by the API server: %v", o.GetKind(), o.GetName(), err)
				}
				kinds[o.GetKind()]++
			}
			t.Logf("%d objects accepted: %v", len(r.objects), kinds)
			if name == "defaults" {
				checkStateKeyKept(ctx, t, c, r, ch, ns, cfg)
			}
		})
	}
}

// dryRunApply is `kubectl apply --server-side --dry-run=server
// ` of one object (server-side apply refuses fields a schema does not declare).
func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
		client.DryRunAll, client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// checkStateKeyKept installs the release's Secret for real, renders again
// (an upgrade) and finds the same MCPQ_STATE_KEY: api replicas rolled by an
// upgrade must keep accepting each other's requestState.
func checkStateKeyKept(ctx context.Context, t *testing.T, c client.Client, r *rendered, ch *chart.Chart, ns string, cfg *rest.Config) {
	t.Helper()
	secrets := r.of("Secret")
	if len(secrets) != 1 {
		t.Fatalf("%d Secrets rendered, want 1", len(secrets))
	}
	s := secrets[0].DeepCopy()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(s), client.FieldOwner(fieldOwner)); err != nil {
		t.Fatalf("apply the Secret: %v", err)
	}
	again, err := renderValues(t, ch, r.name, ns, readValues(t, r.name), cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := func(x *rendered) string { return str(x.of("Secret")[0].Object, "stringData", "MCPQ_STATE_KEY") }
	if k1, k2 := key(r), key(again); k1 == "" || k1 != k2 {
		t.Errorf("the state key changed between install and upgrade (%d → %d characters, equal %v)", len(k1), len(k2), k1 == k2)
	}
	// Offline (no cluster to look in) every render draws a new one: the
	// check above is not passing by accident.
	off1, off2 := render(t, r.name), render(t, r.name)
	if key(off1) == key(off2) {
		t.Errorf("two offline renders drew the same state key")
	}
}
