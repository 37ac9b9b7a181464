// Package helmtest checks the Helm chart deploy/helm/mcpqueue: rendered with
// Helm's own library for every values file in testdata/, held against the
// naming contract of the queues (contract_test.go, written independently of
// the chart's templates), against the flags the real api and worker binaries
// print in -h, and applied with server-side dry run to a real kube-apiserver
// with KEDA's and prometheus-operator's CRDs (apiserver_test.go).
//
// It is a module of its own so that the main module does not require
// Kubernetes; scripts/k8s-test.sh builds kube-apiserver and runs it.
package helmtest

import (
	"maps"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

const releaseName = "mcpq"

// cases are the values files the chart is rendered with.
var cases = []string{"defaults", "nats-two-pools", "asynq-prometheus", "auth", "existing-secret", "nats-secure", "redis-sentinel"}

func repoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func chartDir() string { return filepath.Join(repoRoot(), "deploy", "helm", "mcpqueue") }

// rendered is one render of the chart: its objects, and the values it used.
type rendered struct {
	name    string
	values  chartutil.Values // the merged values (.Values)
	objects []*unstructured.Unstructured
	notes   string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// renderValues renders the chart as `helm install` would with values (a
// file's contents), offline, or with lookups against cfg when it is set.
func renderValues(t *testing.T, ch *chart.Chart, name, namespace string, values map[string]any, cfg *rest.Config) (*rendered, error) {
	t.Helper()
	rv, err := renderValuesOf(ch, namespace, values)
	if err != nil {
		return nil, err
	}
	files, err := renderRaw(ch, rv, cfg)
	if err != nil {
		return nil, err
	}
	r := &rendered{name: name}
	r.values, _ = rv["Values"].(chartutil.Values)
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(f, "NOTES.txt") {
			r.notes = files[f]
			continue
		}
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		docs := releaseutil.SplitManifests(files[f])
		for _, k := range slices.Sorted(maps.Keys(docs)) {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
				t.Fatalf("%s: %s: not YAML: %v\n%s", name, f, err, docs[k])
			}
			if len(m) == 0 {
				continue
			}
			r.objects = append(r.objects, &unstructured.Unstructured{Object: m})
		}
	}
	return r, nil
}

// renderValuesOf is .Values, .Release and the rest for an install.
func renderValuesOf(ch *chart.Chart, namespace string, values map[string]any) (chartutil.Values, error) {
	return chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
}

// renderRaw renders every template: offline, or with lookups against cfg.
func renderRaw(ch *chart.Chart, rv chartutil.Values, cfg *rest.Config) (map[string]string, error) {
	if cfg != nil {
		return engine.RenderWithClient(ch, rv, cfg)
	}
	return engine.Render(ch, rv)
}

// renderFiles renders every template offline, by file name.
func renderFiles(t *testing.T, ch *chart.Chart, values map[string]any) map[string]string {
	t.Helper()
	rv, err := renderValuesOf(ch, "mcpq-test", values)
	if err != nil {
		t.Fatal(err)
	}
	files, err := renderRaw(ch, rv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := chartutil.ReadValues(b)
	if err != nil {
		t.Fatalf("testdata/%s.yaml: %v", name, err)
	}
	return v
}

// render renders testdata/<name>.yaml offline and fails the test on error.
func render(t *testing.T, name string) *rendered {
	t.Helper()
	r, err := renderValues(t, loadChart(t), name, "mcpq-test", readValues(t, name), nil)
	if err != nil {
		t.Fatalf("%s: render: %v", name, err)
	}
	return r
}

// of returns the objects of a kind.
func (r *rendered) of(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func (r *rendered) deployments(t *testing.T) []*appsv1.Deployment {
	t.Helper()
	var out []*appsv1.Deployment
	for _, o := range r.of("Deployment") {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
			t.Fatalf("%s: Deployment %s: %v", r.name, o.GetName(), err)
		}
		out = append(out, &d)
	}
	return out
}

// component is the app.kubernetes.io/component label: api or worker.
func component(d *appsv1.Deployment) string { return d.Labels["app.kubernetes.io/component"] }

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}
