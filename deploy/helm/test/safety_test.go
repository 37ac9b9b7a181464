package helmtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// The chart is safe by default (issue 27): no api without authentication
// unless the values say so, NetworkPolicies around every pod, the
// unauthenticated admin port (/metrics) on a ClusterIP Service of its own and
// never on the public one, and memory limits that hold the results the pods
// may carry. Each property is a checker returning what a render breaks; every
// values file must pass all four, and each checker is shown failing on a
// render that breaks it.

// safetyCheckers are the properties, by name.
var safetyCheckers = map[string]func(*testing.T, *rendered) []string{
	"auth":          authProblems,
	"networkPolicy": networkPolicyProblems,
	"adminService":  adminServiceProblems,
	"memory":        memoryProblems,
}

// Every values file holds all four properties.
func TestSafety(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			r := render(t, name)
			for prop, check := range safetyCheckers {
				for _, p := range check(t, r) {
					t.Errorf("%s: %s", prop, p)
				}
			}
		})
	}
}

// No authentication needs api.auth.disabled: the chart's own defaults do not
// render, and say which values to set; with the opt-out the api runs without
// (MCPQ_INSECURE_NO_AUTH=1), with an issuer it checks tokens.
func TestSafetyAuth(t *testing.T) {
	ch := loadChart(t)
	_, err := renderValues(t, ch, "chart defaults", "mcpq-test", map[string]any{}, nil)
	for _, want := range []string{"api.auth.issuer", "api.auth.jwksURL", "api.auth.disabled=true"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the chart's defaults (no auth, no opt-out): render error %v; want one naming %s", err, want)
		}
	}
	for _, tc := range []struct{ name, values, err string }{
		{"opt-out is false", "api: {auth: {disabled: false}}", "api.auth.disabled=true"},
		{"old key", "api: {insecureNoAuth: true}", "api.insecureNoAuth is now api.auth.disabled"},
		{"both", "api: {publicURL: 'https://m.example', auth: {disabled: true, issuer: 'https://i.example', jwksURL: 'https://i.example/k'}}", "contradict"},
		{"console with auth, no admins", "api: {publicURL: 'https://m.example', auth: {issuer: 'https://i.example', jwksURL: 'https://i.example/k'}, console: {enabled: true}}", "needs api.console.admins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := renderInline(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("render: %v; want an error with %q", err, tc.err)
			}
		})
	}
	for name, wantNoAuth := range map[string]bool{"defaults": true, "auth": false, "nats-secure": false} {
		r := render(t, name)
		if ps := authProblems(t, r); len(ps) > 0 {
			t.Errorf("%s: %v", name, ps)
		}
		env := envOf(apiDeployment(t, r).Spec.Template.Spec.Containers[0])
		if got := env["MCPQ_INSECURE_NO_AUTH"].Value == "1"; got != wantNoAuth {
			t.Errorf("%s: MCPQ_INSECURE_NO_AUTH set %v, want %v", name, got, wantNoAuth)
		}
		if _, console := env["MCPQ_CONSOLE"]; console == (name == "auth") {
			t.Errorf("%s: MCPQ_CONSOLE %q; the console is off unless api.console.enabled", name, env["MCPQ_CONSOLE"].Value)
		}
	}
	// The checker itself: an api without auth whose values do not opt out.
	r := render(t, "defaults")
	delete(r.values["api"].(map[string]any)["auth"].(map[string]any), "disabled")
	if ps := authProblems(t, r); len(ps) == 0 {
		t.Error("authProblems passed an api without authentication and without api.auth.disabled")
	}
}

// authProblems: the api either checks bearer tokens or its values say
// api.auth.disabled: true.
func authProblems(t *testing.T, r *rendered) []string {
	env := envOf(apiDeployment(t, r).Spec.Template.Spec.Containers[0])
	disabled, _ := dig(r.values, "api", "auth", "disabled").(bool)
	switch {
	case env["MCPQ_INSECURE_NO_AUTH"].Value == "1" && !disabled:
		return []string{"the api runs without authentication and api.auth.disabled is not true"}
	case env["MCPQ_INSECURE_NO_AUTH"].Value != "1" && (env["MCPQ_AUTH_ISSUER"].Value == "" || env["MCPQ_AUTH_JWKS_URL"].Value == ""):
		return []string{"the api has neither MCPQ_AUTH_ISSUER and MCPQ_AUTH_JWKS_URL nor MCPQ_INSECURE_NO_AUTH"}
	}
	return nil
}

func apiDeployment(t *testing.T, r *rendered) *appsv1.Deployment {
	t.Helper()
	for _, d := range r.deployments(t) {
		if component(d) == "api" {
			return d
		}
	}
	t.Fatalf("%s: no api Deployment", r.name)
	return nil
}

// NetworkPolicies are on by default and can be switched off; with them off
// (or one missing, or the admin port opened to all) the checker fails.
func TestSafetyNetworkPolicy(t *testing.T) {
	r := render(t, "defaults")
	if n := len(r.of("NetworkPolicy")); n != 2 {
		t.Errorf("defaults: %d NetworkPolicies, want 2 (the api, the default pool)", n)
	}
	if ps := networkPolicyProblems(t, r); len(ps) > 0 {
		t.Errorf("defaults: %v", ps)
	}
	off, err := renderInline(t, "api: {auth: {disabled: true}}\nnetworkPolicy: {enabled: false}")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(off.of("NetworkPolicy")); n != 0 {
		t.Errorf("networkPolicy.enabled false: %d NetworkPolicies", n)
	}
	if ps := networkPolicyProblems(t, off); len(ps) < 2 {
		t.Errorf("networkPolicyProblems without any NetworkPolicy: %v; want the api and the pool unselected", ps)
	}
	for _, tc := range []struct{ name, values, want string }{
		{"admin open to everyone", "networkPolicy: {adminFrom: [{namespaceSelector: {}}]}", "open to every pod"},
		{"egress not restricted", "networkPolicy: {egress: {enabled: false}}", "egress is not restricted"},
		{"broker port not allowed", "networkPolicy: {egress: {brokerPorts: [4223]}}", "broker port 4222"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderInline(t, noAuth+tc.values)
			if err != nil {
				t.Fatal(err)
			}
			ps := networkPolicyProblems(t, r)
			if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %v; want one with %q", ps, tc.want)
			}
		})
	}
	// With no adminFrom nobody but the node reaches the admin ports: no rule.
	r, err = renderInline(t, "api: {auth: {disabled: true}}\nnetworkPolicy: {adminFrom: []}")
	if err != nil {
		t.Fatal(err)
	}
	if ps := networkPolicyProblems(t, r); len(ps) > 0 {
		t.Errorf("adminFrom []: %v", ps)
	}
	for _, o := range r.of("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		fromUnstructured(t, o.Object, &np)
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port.IntValue() != 8080 {
					t.Errorf("adminFrom []: %s lets in port %s", np.Name, p.Port.String())
				}
			}
		}
	}
	// The ports of the broker's URLs, Sentinels and the JWKS URL.
	for _, tc := range []struct {
		values string
		want   []int
	}{
		{"nats: {url: 'nats://u:p@a:4333,nats://b'}", []int{4333, 4222}},
		{"broker: asynq\nredis: {url: 'redis+sentinel://s0:26380,s1/m'}", []int{26380, 26379, 6379}},
		{"broker: asynq\nredis: {url: 'rediss://:pw@r.data:6380/1'}", []int{6380}},
	} {
		r, err := renderInline(t, noAuth+tc.values)
		if err != nil {
			t.Fatal(err)
		}
		np := policyFor(t, r, apiDeployment(t, r))
		if got := np.Spec.Egress[1].Ports; !reflect.DeepEqual(portNumbers(got), tc.want) {
			t.Errorf("%s: broker ports %v, want %v", tc.values, portNumbers(got), tc.want)
		}
	}
	np := policyFor(t, render(t, "nats-secure"), apiDeployment(t, render(t, "nats-secure")))
	if !slices.ContainsFunc(np.Spec.Egress, func(e networkingv1.NetworkPolicyEgressRule) bool {
		return reflect.DeepEqual(portNumbers(e.Ports), []int{8443})
	}) {
		t.Errorf("nats-secure: the api's egress %v does not reach the JWKS URL's port 8443", np.Spec.Egress)
	}
}

func portNumbers(ps []networkingv1.NetworkPolicyPort) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Port.IntValue())
	}
	return out
}

func fromUnstructured(t *testing.T, m map[string]any, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, into, true); err != nil {
		t.Fatalf("%T: %v", into, err)
	}
}

// policyFor is the one NetworkPolicy selecting d's pods (nil if none).
func policyFor(t *testing.T, r *rendered, d *appsv1.Deployment) *networkingv1.NetworkPolicy {
	var found *networkingv1.NetworkPolicy
	for _, o := range r.of("NetworkPolicy") {
		var np networkingv1.NetworkPolicy
		fromUnstructured(t, o.Object, &np)
		if len(np.Spec.PodSelector.MatchExpressions) == 0 && subset(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
			if found != nil {
				t.Errorf("%s: selected by NetworkPolicies %s and %s", d.Name, found.Name, np.Name)
			}
			found = &np
		}
	}
	return found
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// networkPolicyProblems: each Deployment's pods are selected by a
// NetworkPolicy restricting ingress and egress. Ingress: the api's MCP port
// from networkPolicy.mcpFrom (anyone when empty), the admin port (api and
// workers) only from networkPolicy.adminFrom, never from everywhere, no other
// port. Egress: DNS, and the broker's port as the values' URL gives it.
func networkPolicyProblems(t *testing.T, r *rendered) []string {
	var out []string
	np := r.values["networkPolicy"].(map[string]any)
	for _, d := range r.deployments(t) {
		pol := policyFor(t, r, d)
		if pol == nil {
			out = append(out, fmt.Sprintf("%s: no NetworkPolicy selects its pods", d.Name))
			continue
		}
		if !slices.Contains(pol.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			out = append(out, fmt.Sprintf("%s: ingress is not restricted (policyTypes %v)", pol.Name, pol.Spec.PolicyTypes))
		}
		ports := map[string]int{}
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			ports[p.Name] = int(p.ContainerPort)
		}
		for _, rule := range pol.Spec.Ingress {
			if len(rule.Ports) == 0 {
				out = append(out, fmt.Sprintf("%s: an ingress rule opens every port", pol.Name))
			}
			for _, p := range rule.Ports {
				switch n := p.Port.IntValue(); {
				case n == ports["http"] && component(d) == "api":
					if !sameJSON(rule.From, np["mcpFrom"]) {
						out = append(out, fmt.Sprintf("%s: the MCP port from %v; networkPolicy.mcpFrom is %v", pol.Name, rule.From, np["mcpFrom"]))
					}
				case n == ports["admin"]:
					if everyone(rule.From) {
						out = append(out, fmt.Sprintf("%s: the admin port %d is open to every pod", pol.Name, n))
					} else if !sameJSON(rule.From, np["adminFrom"]) {
						out = append(out, fmt.Sprintf("%s: the admin port from %v; networkPolicy.adminFrom is %v", pol.Name, rule.From, np["adminFrom"]))
					}
				default:
					out = append(out, fmt.Sprintf("%s: ingress on port %s, which serves nothing of %s", pol.Name, p.Port.String(), d.Name))
				}
			}
		}
		if !slices.Contains(pol.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			out = append(out, fmt.Sprintf("%s: egress is not restricted (policyTypes %v)", pol.Name, pol.Spec.PolicyTypes))
			continue
		}
		allowed := func(proto corev1.Protocol, port int) bool {
			return slices.ContainsFunc(pol.Spec.Egress, func(e networkingv1.NetworkPolicyEgressRule) bool {
				return slices.ContainsFunc(e.Ports, func(p networkingv1.NetworkPolicyPort) bool {
					return p.Port.IntValue() == port && (p.Protocol == nil || *p.Protocol == proto)
				})
			})
		}
		if !allowed(corev1.ProtocolUDP, 53) || !allowed(corev1.ProtocolTCP, 53) {
			out = append(out, fmt.Sprintf("%s: no egress to DNS (53, UDP and TCP)", pol.Name))
		}
		for _, port := range brokerPortsOf(t, r, d) {
			if !allowed(corev1.ProtocolTCP, port) {
				out = append(out, fmt.Sprintf("%s: no egress to the broker port %d", pol.Name, port))
			}
		}
	}
	return out
}

// brokerPortsOf are the broker ports d's pods dial, from the values' URL
// (its first host) and the Sentinels the pods get.
func brokerPortsOf(t *testing.T, r *rendered, d *appsv1.Deployment) []int {
	env := envOf(d.Spec.Template.Spec.Containers[0])
	var out []int
	raw, def := fmt.Sprint(dig(r.values, "nats", "url")), 4222
	if env["MCPQ_BROKER"].Value == "asynq" {
		raw, def = fmt.Sprint(dig(r.values, "redis", "url")), 6379
		for _, a := range strings.Split(env["MCPQ_REDIS_SENTINELS"].Value, ",") {
			if _, p, err := net.SplitHostPort(a); err == nil {
				n, _ := strconv.Atoi(p)
				out = append(out, n)
			}
		}
	}
	u, err := url.Parse(strings.Split(raw, ",")[0])
	if err != nil {
		t.Fatalf("broker URL %q: %v", raw, err)
	}
	if u.Host != "" {
		n, err := strconv.Atoi(u.Port())
		if err != nil {
			n = def
		}
		out = append(out, n)
	}
	return out
}

// everyone: peers that let in every pod (no from, or a peer selecting all
// namespaces with no pod selector, or all addresses).
func everyone(from []networkingv1.NetworkPolicyPeer) bool {
	if len(from) == 0 {
		return true
	}
	for _, p := range from {
		allNS := p.NamespaceSelector != nil && len(p.NamespaceSelector.MatchLabels) == 0 && len(p.NamespaceSelector.MatchExpressions) == 0
		if allNS && p.PodSelector == nil || p.IPBlock != nil && strings.HasSuffix(p.IPBlock.CIDR, "/0") {
			return true
		}
	}
	return false
}

// sameJSON compares a rendered field with a value as JSON, keys sorted (nil
// and [] alike).
func sameJSON(a, b any) bool {
	norm := func(x any) string {
		j, _ := json.Marshal(x)
		var v any
		_ = json.Unmarshal(j, &v)
		if v == nil {
			v = []any{}
		}
		j, _ = json.Marshal(v)
		return string(j)
	}
	return norm(a) == norm(b)
}

// The admin port is on <release>-api-admin (ClusterIP), not on the public
// Service, even when that one is a LoadBalancer; the ServiceMonitors and
// the Prometheus trigger follow it.
func TestSafetyAdminService(t *testing.T) {
	r, err := renderInline(t, "api: {auth: {disabled: true}, service: {type: LoadBalancer}}\nserviceMonitor: {enabled: true}")
	if err != nil {
		t.Fatal(err)
	}
	if ps := adminServiceProblems(t, r); len(ps) > 0 {
		t.Errorf("public Service LoadBalancer: %v", ps)
	}
	types := map[string]string{}
	for _, s := range r.of("Service") {
		types[s.GetName()] = str(s.Object, "spec", "type")
	}
	if want := map[string]string{"mcpq-mcpqueue-api": "LoadBalancer", "mcpq-mcpqueue-api-admin": "ClusterIP", "mcpq-mcpqueue-worker-default": ""}; !reflect.DeepEqual(types, want) {
		t.Errorf("Services %v, want %v", types, want)
	}
	// The checker fails when the admin port is put back on the public
	// Service, or a ServiceMonitor selects that Service.
	pub := func(r *rendered) map[string]any {
		for _, s := range r.of("Service") {
			if s.GetName() == "mcpq-mcpqueue-api" {
				return s.Object
			}
		}
		t.Fatal("no public Service")
		return nil
	}
	spec := pub(r)["spec"].(map[string]any)
	spec["ports"] = append(spec["ports"].([]any), map[string]any{"name": "admin", "port": int64(9090), "targetPort": "admin"})
	if ps := adminServiceProblems(t, r); !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, "public") }) {
		t.Errorf("the admin port on the LoadBalancer Service: problems %v", ps)
	}
	r = render(t, "asynq-prometheus")
	pub(r)["metadata"].(map[string]any)["labels"].(map[string]any)["mcpqueue.dev/port"] = "admin"
	if ps := adminServiceProblems(t, r); !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, "ServiceMonitor") }) {
		t.Errorf("a ServiceMonitor selecting the public Service: problems %v", ps)
	}
}

// adminServiceProblems: no Service exposes the admin port of a pod together
// with another port, nor as anything but ClusterIP (headless included); the
// api's admin port has a Service; each ServiceMonitor selects only Services
// that have its port; a Prometheus trigger's job is the api's admin Service.
func adminServiceProblems(t *testing.T, r *rendered) []string {
	var out []string
	var services []corev1.Service
	for _, o := range r.of("Service") {
		var s corev1.Service
		fromUnstructured(t, o.Object, &s)
		services = append(services, s)
	}
	apiAdmin := ""
	for _, d := range r.deployments(t) {
		var admin int32
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			if p.Name == "admin" {
				admin = p.ContainerPort
			}
		}
		for _, s := range services {
			if len(s.Spec.Selector) == 0 || !subset(s.Spec.Selector, d.Spec.Template.Labels) {
				continue
			}
			hasAdmin := slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.TargetPort.String() == "admin" || p.TargetPort.IntValue() == int(admin)
			})
			switch {
			case !hasAdmin:
			case len(s.Spec.Ports) > 1:
				out = append(out, fmt.Sprintf("Service %s exposes %s's admin port beside others: the admin port is on the public Service", s.Name, d.Name))
			case s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP:
				out = append(out, fmt.Sprintf("Service %s exposes %s's admin port as %s", s.Name, d.Name, s.Spec.Type))
			case component(d) == "api":
				apiAdmin = s.Name
			}
		}
	}
	if apiAdmin == "" {
		out = append(out, "no ClusterIP Service of the api's admin port alone")
	}
	for _, sm := range r.of("ServiceMonitor") {
		sel, _ := dig(sm.Object, "spec", "selector", "matchLabels").(map[string]any)
		want := map[string]string{}
		for k, v := range sel {
			want[k] = fmt.Sprint(v)
		}
		for _, s := range services {
			if subset(want, s.Labels) && !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "admin" }) || subset(want, s.Labels) && len(s.Spec.Ports) > 1 {
				out = append(out, fmt.Sprintf("ServiceMonitor %s selects Service %s, which is not an admin Service", sm.GetName(), s.Name))
			}
		}
	}
	for _, so := range r.of("ScaledObject") {
		for _, tr := range dig(so.Object, "spec", "triggers").([]any) {
			q := fmt.Sprint(dig(tr.(map[string]any), "metadata", "query"))
			if strings.Contains(q, "job=") && !strings.Contains(q, fmt.Sprintf("job=%q", apiAdmin)) {
				out = append(out, fmt.Sprintf("ScaledObject %s: query %s; the api's metrics are scraped as job %q", so.GetName(), q, apiAdmin))
			}
		}
	}
	return out
}

// The memory limits hold 3 results of maxResult: the render fails below
// that, with a message naming the values; a limit raised with maxResult
// renders; MCPQ_MAX_RESULT is maxResult in bytes as Kubernetes reads the
// quantity.
func TestSafetyMemory(t *testing.T) {
	for _, tc := range []struct{ name, values, err string }{
		{"api below 3 × 64Mi", "api: {resources: {limits: {memory: 128Mi}}}", "api.resources.limits.memory 128Mi is below 3 × pool default's maxResult (64Mi)"},
		{"pool below 3 × maxResult", "worker: {maxResult: 256Mi}\napi: {resources: {limits: {memory: 2Gi}}}", "pool default: resources.limits.memory 512Mi is below 3 × maxResult (256Mi)"},
		{"api below a pool's maxResult", "pools: [{name: a, maxResult: 200Mi, resources: {limits: {memory: 1Gi}}}, {name: b}]", "below 3 × pool a's maxResult (200Mi)"},
		{"bad quantity", "worker: {maxResult: lots}", `pool default: maxResult "lots" is no memory quantity`},
		{"bad limit", "api: {resources: {limits: {memory: 1Gb}}}", `api.resources.limits.memory "1Gb" is no memory quantity`},
		{"zero", "worker: {maxResult: 0}", "must be more than 0"},
		{"env instead", "worker: {env: {MCPQ_MAX_RESULT: '1'}}", "not env.MCPQ_MAX_RESULT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := renderInline(t, noAuth+tc.values); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("render: %v; want an error with %q", err, tc.err)
			}
		})
	}
	b, _ := builtBinaries(t)
	for maxResult, limit := range map[string]string{"192Mi": "576Mi", "1.5Gi": "4608Mi", "100M": "300M", "67108864": "201326592", "1Gi": "4Gi"} {
		values := fmt.Sprintf("api: {auth: {disabled: true}, resources: {limits: {memory: %s}}}\nworker: {maxResult: %q, resources: {limits: {memory: %s}}}", limit, maxResult, limit)
		if maxResult == "67108864" {
			values = strings.Replace(values, `"67108864"`, "67108864", 1) // a YAML number
		}
		r, err := renderInline(t, values)
		if err != nil {
			t.Errorf("maxResult %s, limits %s: %v", maxResult, limit, err)
			continue
		}
		if ps := memoryProblems(t, r); len(ps) > 0 {
			t.Errorf("maxResult %s: %v", maxResult, ps)
		}
		for _, d := range r.deployments(t) {
			if component(d) == "worker" {
				got := envOf(d.Spec.Template.Spec.Containers[0])["MCPQ_MAX_RESULT"].Value
				if want := resource.MustParse(maxResult); got != strconv.FormatInt(want.Value(), 10) {
					t.Errorf("maxResult %s: MCPQ_MAX_RESULT=%s, want %d", maxResult, got, want.Value())
				}
				checkPod(t, d, b["worker"], r.secretKeys())
			}
		}
	}
	// The checker fails on a limit below 3 × MCPQ_MAX_RESULT, api or worker.
	for _, comp := range []string{"api", "worker"} {
		r := render(t, "defaults")
		for _, o := range r.of("Deployment") {
			if o.GetLabels()["app.kubernetes.io/component"] == comp {
				c := dig(o.Object, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)
				c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "191Mi"
			}
		}
		if ps := memoryProblems(t, r); len(ps) != 1 || !strings.Contains(ps[0], "191Mi") {
			t.Errorf("%s limit 191Mi with maxResult 64Mi: problems %v", comp, ps)
		}
	}
}

// memoryProblems: every worker has MCPQ_MAX_RESULT and a memory limit of at
// least 3 times it; the api's limit is at least 3 times the largest.
func memoryProblems(t *testing.T, r *rendered) []string {
	var out []string
	var largest int64
	var api *appsv1.Deployment
	limitOf := func(d *appsv1.Deployment) (resource.Quantity, bool) {
		q, ok := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
		return q, ok
	}
	for _, d := range r.deployments(t) {
		if component(d) == "api" {
			api = d
			continue
		}
		v := envOf(d.Spec.Template.Spec.Containers[0])["MCPQ_MAX_RESULT"].Value
		mr, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mr <= 0 {
			out = append(out, fmt.Sprintf("%s: MCPQ_MAX_RESULT=%q is no byte count", d.Name, v))
			continue
		}
		largest = max(largest, mr)
		if q, ok := limitOf(d); ok && q.Value() < 3*mr {
			out = append(out, fmt.Sprintf("%s: memory limit %s below 3 × MCPQ_MAX_RESULT (%d bytes)", d.Name, q.String(), mr))
		}
	}
	if q, ok := limitOf(api); ok && q.Value() < 3*largest {
		out = append(out, fmt.Sprintf("%s: memory limit %s below 3 × the largest MCPQ_MAX_RESULT (%d bytes)", api.Name, q.String(), largest))
	}
	return out
}
