// Package layout_test enforces the package layout — which package may import
// which: the seam packages broker and taskstate, auth and vocab, and the
// shared MCP wire types (internal/mcpwire) import only the standard library,
// the Go client (client) only those wire types besides; an
// implementation imports only its seam (auth/jwtauth and auth/authtest from
// this module only auth); telemetry takes plain
// values and imports no package of this module; the layers point inward;
// only cmd/, the connectors below backend/ and integration name an
// implementation; backend itself is the seams only (broker, taskstate and the
// standard library), so the libraries that take a Backend reach no broker
// client; only cmd/, worker and integration use the binaries' internal/cli;
// only gosdk (and
// users' code) imports go-sdk; and nothing imports an example but the
// example itself (examples/conformance its fixtures), so the binaries'
// demo tools live in internal/demo; and only internal/embednats (the
// all-in-one api's server) and the tests import nats-server, so a worker
// module built on backend, worker and consumer does not (docs/architecture.md, "Processes and
// seams"; docs/adr/0002-wire-layer-and-go-sdk.md). It reads the module's
// import graph with go/build (non-test files only, for the current
// platform) and fails with the offending import and the path that leads
// to it.
package layout_test

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/mcpqueue/mcpqueue"

// implSuffixes name concrete seam implementations, present and planned. Any
// other package below broker/ or taskstate/ that is not a contract suite
// (name ending in "test") counts as an implementation too.
var implSuffixes = []string{
	"broker/natsbroker",
	"taskstate/natskv",
	"broker/asynqbroker",
	"taskstate/redisstate",
	"broker/membroker",
	"taskstate/memstate",
}

// vocab is the words the layers share (job meta keys, error codes): a leaf
// any package above the seams may import.
const vocab = "vocab"

// mcpwire is the one set of MCP wire types (JSON-RPC envelopes, tools,
// tasks of both revisions) that mcpfront, bridge and client share: a leaf
// that imports only the standard library, so the client stays free of
// dependencies.
const mcpwire = "internal/mcpwire"

// mayNameImpls are the only places whose non-test code may import an
// implementation: binaries, the wiring they share, and end-to-end tests.
var mayNameImpls = []string{"cmd", "backend", "integration"}

// testHelpers name implementations too, but serve _test files only: no
// non-test code may import them (checked below), so they never reach a
// binary or a library.
var testHelpers = []string{"internal/testenv"}

// mayNameMemory are the packages that may name only the in-memory
// implementations: the test harness a handler author runs the real worker
// over in a unit test (consumer/consumertest). Nothing there reaches a
// real broker or store.
var mayNameMemory = []string{"consumer/consumertest"}

// memoryImpls are the in-memory implementations, for unit tests only.
var memoryImpls = []string{"broker/membroker", "taskstate/memstate"}

// goSDK is the official Go MCP SDK. Only the adapter package gosdk and
// users' code (examples, end-to-end tests) may depend on it: the queue's own
// packages own their wire layer (ADR 0001) and must build without it.
const goSDK = "github.com/modelcontextprotocol/go-sdk"

// mayUseGoSDK are the packages that may import go-sdk.
var mayUseGoSDK = []string{"gosdk", "examples", "integration"}

// natsServer is the NATS server. Only the all-in-one api's embedded server
// (internal/embednats) and the tests' servers import it, so a worker module
// (backend, worker, consumer) never builds it.
const natsServer = "github.com/nats-io/nats-server/v2"

// mayUseNATSServer are the packages that may import nats-server.
var mayUseNATSServer = []string{"internal/embednats", "internal/natstest", "integration"}

// workerSurface are the packages a worker module imports: none may reach
// nats-server.
var workerSurface = []string{"backend", "backend/natsbackend", "backend/redisbackend", "backend/membackend", "internal/cli", "worker", "consumer"}

// binaryKit is the binaries' shared flags, logging and telemetry setup;
// mayUseBinaryKit are the only packages that may import it.
const binaryKit = "internal/cli"

var mayUseBinaryKit = []string{"cmd", "worker", "integration"}

// graph maps a module-relative package path ("" is the root) to its
// non-test imports (full import paths).
type graph map[string][]string

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func isImpl(pkg string) bool {
	for _, s := range implSuffixes {
		if pkg == s || strings.HasSuffix(pkg, "/"+s) {
			return true
		}
	}
	for _, seam := range []string{"broker", "taskstate"} {
		if strings.HasPrefix(pkg, seam+"/") && !strings.HasSuffix(pkg, "test") {
			return true
		}
	}
	return false
}

// deps returns every module package pkg reaches, each with the shortest
// import chain that gets there (pkg → … → dep).
func (g graph) deps(pkg string) map[string][]string {
	out := map[string][]string{}
	queue := [][]string{{pkg}}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, imp := range g[c[len(c)-1]] {
			r, ok := rel(imp)
			if !ok {
				continue
			}
			if _, seen := out[r]; seen {
				continue
			}
			next := append(slices.Clone(c), r)
			out[r] = next
			queue = append(queue, next)
		}
	}
	return out
}

// internalLeaf: r is a package under internal/ that imports no package of
// this module, so importing it brings in nothing but the standard library
// and outside modules.
func (g graph) internalLeaf(r string) bool {
	if !under(r, "internal") {
		return false
	}
	for _, imp := range g[r] {
		if _, ok := rel(imp); ok {
			return false
		}
	}
	return true
}

func chain(c []string) string { return strings.Join(c, " → ") }

// exampleOf is the example a package below examples/ belongs to:
// examples/conformance for examples/conformance/fixtures.
func exampleOf(pkg string) string {
	rest, _ := strings.CutPrefix(pkg, "examples/")
	name, _, _ := strings.Cut(rest, "/")
	return "examples/" + name
}

// check returns every violation of the layout rules in g, one line each.
func check(g graph) []string {
	var bad []string
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)

	for _, p := range pkgs {
		switch {
		// The seam packages, auth (who a request acts for, which the front
		// end imports) and the shared vocabulary are leaves: standard library
		// only — the seams not even the vocabulary. So is the Go client
		// (client), which users import into their agents.
		case p == "broker" || p == "taskstate" || p == "auth" || p == vocab || p == mcpwire:
			for _, imp := range g[p] {
				if !isStd(imp) {
					bad = append(bad, fmt.Sprintf("%s must import only the standard library, but imports %s", p, imp))
				}
			}
		// The Go client takes from this module only the MCP wire types,
		// themselves standard library only.
		case p == "client":
			for _, imp := range g[p] {
				if !isStd(imp) && imp != module+"/"+mcpwire {
					bad = append(bad, fmt.Sprintf("client must import only the standard library and %s/%s, but imports %s", module, mcpwire, imp))
				}
			}
		// backend is the value the libraries take: the seams and the
		// standard library only, so taking a Backend builds no client.
		case p == "backend":
			for _, imp := range g[p] {
				if r, ok := rel(imp); !isStd(imp) && (!ok || (r != "broker" && r != "taskstate")) {
					bad = append(bad, fmt.Sprintf("backend may import only %s/broker, %s/taskstate and the standard library, but imports %s", module, module, imp))
				}
			}
		// Implementations and contract suites of a seam import, from this
		// module, only their seam's interface package and internal helpers;
		// through any chain they never reach the other seam, another
		// implementation, or the layers above.
		case strings.HasPrefix(p, "broker/") || strings.HasPrefix(p, "taskstate/"):
			seam, _, _ := strings.Cut(p, "/")
			other := map[string]string{"broker": "taskstate", "taskstate": "broker"}[seam]
			for _, imp := range g[p] {
				r, ok := rel(imp)
				if ok && r != seam && !under(r, "internal") {
					bad = append(bad, fmt.Sprintf("%s may import from this module only %s/%s and internal helpers, but imports %s", p, module, seam, imp))
				}
			}
			for dep, c := range g.deps(p) {
				if under(dep, other) || (isImpl(dep) && dep != p) || dep == p {
					bad = append(bad, fmt.Sprintf("%s must not reach %s: %s", p, dep, chain(c)))
					continue
				}
				for _, above := range []string{"producer", "consumer", "mcpfront", "backend", "worker", "cmd", "examples", "integration"} {
					if under(dep, above) {
						bad = append(bad, fmt.Sprintf("%s must not reach %s: %s", p, dep, chain(c)))
					}
				}
			}
		}

		// auth's implementations and test helpers (auth/jwtauth,
		// auth/authtest) take from this module only auth itself and
		// internal leaves (helpers such as internal/loopback that import
		// nothing of this module).
		if under(p, "auth") && p != "auth" {
			for _, imp := range g[p] {
				if r, ok := rel(imp); ok && r != "auth" && !g.internalLeaf(r) {
					bad = append(bad, fmt.Sprintf("%s may import from this module only %s/auth and internal leaves, but imports %s", p, module, imp))
				}
			}
		}

		// telemetry is called by every layer, so it takes plain values and
		// imports no package of this module.
		if under(p, "telemetry") {
			for _, imp := range g[p] {
				if r, ok := rel(imp); ok && !under(r, "telemetry") {
					bad = append(bad, fmt.Sprintf("%s must import no package of this module, but imports %s", p, imp))
				}
			}
		}

		// examples/ is what users copy: nothing builds on an example but
		// the example itself (examples/conformance on its fixtures).
		for _, imp := range g[p] {
			if r, ok := rel(imp); ok && under(r, "examples") && !under(p, exampleOf(r)) {
				bad = append(bad, fmt.Sprintf("%s imports %s; nothing may import an example but the example itself", p, imp))
			}
		}

		// Dependency direction between the layers, through any chain.
		forbidden := map[string][]string{
			"producer": {"consumer", "mcpfront"},
			"consumer": {"mcpfront", "producer"},
			"mcpfront": {"consumer"},
			"console":  {"consumer", "mcpfront", "auth", "backend"},
		}
		for layer, never := range forbidden {
			if !under(p, layer) {
				continue
			}
			for dep, c := range g.deps(p) {
				for _, n := range never {
					if under(dep, n) {
						bad = append(bad, fmt.Sprintf("%s must never import %s, but does: %s", p, n, chain(c)))
					}
				}
			}
		}

		// Only binaries, wiring and end-to-end tests name implementations.
		allowed := isImpl(p)
		for _, d := range mayNameImpls {
			allowed = allowed || under(p, d)
		}
		allowed = allowed || slices.Contains(testHelpers, p)
		for _, imp := range g[p] {
			if r, ok := rel(imp); ok && slices.Contains(testHelpers, r) {
				bad = append(bad, fmt.Sprintf("%s imports the test helper %s; only _test files may", p, imp))
			}
		}
		memoryOnly := slices.Contains(mayNameMemory, p)
		if !allowed {
			for _, imp := range g[p] {
				if r, ok := rel(imp); ok && isImpl(r) && !(memoryOnly && slices.Contains(memoryImpls, r)) {
					bad = append(bad, fmt.Sprintf("%s imports the concrete implementation %s; only cmd/, backend and integration/ may name one", p, imp))
				}
			}
		}
		// The library packages must not reach one through anything either
		// (e.g. by importing backend).
		for _, lib := range []string{"broker", "taskstate", "producer", "consumer", "mcpfront", "console", "telemetry"} {
			if p != lib {
				continue
			}
			for dep, c := range g.deps(p) {
				if isImpl(dep) || (under(dep, "backend") && dep != "backend") || under(dep, "worker") || dep == binaryKit {
					bad = append(bad, fmt.Sprintf("%s reaches %s: %s", p, dep, chain(c)))
				}
			}
		}
		// Only the adapter (and users' code) depends on go-sdk.
		sdkOK := false
		for _, d := range mayUseGoSDK {
			sdkOK = sdkOK || under(p, d)
		}
		if !sdkOK {
			for _, imp := range g[p] {
				if imp == goSDK || strings.HasPrefix(imp, goSDK+"/") {
					bad = append(bad, fmt.Sprintf("%s imports %s; only gosdk (and examples/, integration/) may", p, imp))
				}
			}
			for dep, c := range g.deps(p) {
				if under(dep, "gosdk") {
					bad = append(bad, fmt.Sprintf("%s reaches go-sdk through gosdk: %s", p, chain(c)))
				}
			}
		}
	}
	bad = append(bad, checkNATSServer(g)...)
	bad = append(bad, checkBinaryKit(g)...)
	sort.Strings(bad)
	return slices.Compact(bad)
}

// checkNATSServer: only mayUseNATSServer import nats-server, and the worker
// surface reaches no package that does.
func checkNATSServer(g graph) []string {
	var bad []string
	imports := func(p string) string {
		for _, imp := range g[p] {
			if imp == natsServer || strings.HasPrefix(imp, natsServer+"/") {
				return imp
			}
		}
		return ""
	}
	for p := range g {
		ok := false
		for _, d := range mayUseNATSServer {
			ok = ok || under(p, d)
		}
		if imp := imports(p); imp != "" && !ok {
			bad = append(bad, fmt.Sprintf("%s imports %s; only internal/embednats (and internal/natstest, integration/) may", p, imp))
		}
	}
	for _, p := range workerSurface {
		for dep, c := range g.deps(p) {
			if imports(dep) != "" {
				bad = append(bad, fmt.Sprintf("%s reaches nats-server: %s", p, chain(c)))
			}
		}
	}
	return bad
}

// checkBinaryKit: only mayUseBinaryKit import internal/cli, the binaries'
// flags and setup; a library or connector takes its settings as values.
func checkBinaryKit(g graph) []string {
	var bad []string
	for p, imps := range g {
		ok := p == binaryKit
		for _, d := range mayUseBinaryKit {
			ok = ok || under(p, d)
		}
		if !ok && slices.Contains(imps, module+"/"+binaryKit) {
			bad = append(bad, fmt.Sprintf("%s imports %s/%s; only cmd/, worker and integration/ may", p, module, binaryKit))
		}
	}
	return bad
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if !strings.Contains(string(b), "module "+module) {
				t.Fatalf("%s/go.mod is not module %s", dir, module)
			}
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// load reads the import graph of every package in the module.
func load(t *testing.T) graph {
	t.Helper()
	root := moduleRoot(t)
	g := graph{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules") {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is not ours
			}
		}
		p, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r, _ := filepath.Rel(root, path)
		r = filepath.ToSlash(r)
		if r == "." {
			r = ""
		}
		g[r] = p.Imports // non-test files only
		return nil
	})
	if err != nil {
		t.Fatalf("reading the module: %v", err)
	}
	return g
}

func TestLayout(t *testing.T) {
	t.Parallel()
	g := load(t)
	// The rules mean nothing if the packages they name were not read.
	for _, p := range []string{"broker", "taskstate", "producer", "consumer", "mcpfront", "telemetry", "auth", "auth/jwtauth", "client", mcpwire, "broker/natsbroker", "taskstate/natskv", "backend", "backend/natsbackend", "backend/redisbackend", "internal/cli", "examples/conformance", "examples/conformance/fixtures"} {
		if _, ok := g[p]; !ok {
			t.Fatalf("package %s not found in the module (read %d packages); the layout test is blind", p, len(g))
		}
	}
	if len(g["broker/natsbroker"]) == 0 || !slices.Contains(g["broker/natsbroker"], module+"/broker") {
		t.Fatalf("broker/natsbroker imports %v: the graph looks wrong", g["broker/natsbroker"])
	}
	for _, v := range check(g) {
		t.Errorf("layout: %s", v)
	}
}

// TestNarrowExceptions: consumer/consumertest may name the in-memory
// implementations and no other; internal/testenv may name any, and no
// non-test code may import it.
func TestNarrowExceptions(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return module + "/" + p }
	got := strings.Join(check(graph{
		"consumer/consumertest": {m("consumer"), m("broker/membroker"), m("taskstate/memstate"), m("broker/natsbroker")},
		"internal/testenv":      {m("broker/natsbroker"), m("taskstate/natskv")},
		"console":               {m("internal/testenv")},
	}), "\n")
	for _, want := range []string{
		"consumer/consumertest imports the concrete implementation " + m("broker/natsbroker"),
		"console imports the test helper " + m("internal/testenv") + "; only _test files may",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing violation %q; got:\n%s", want, got)
		}
	}
	for _, fine := range []string{"implementation " + m("broker/membroker"), "implementation " + m("taskstate/memstate"), "internal/testenv imports"} {
		if strings.Contains(got, fine) {
			t.Errorf("allowed import reported (%q):\n%s", fine, got)
		}
	}
}

// TestRulesCatchViolations runs the rules on a module that breaks each of
// them, so a rule that silently stops matching fails here.
func TestRulesCatchViolations(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return module + "/" + p }
	g := graph{
		"broker":               {"context", "github.com/nats-io/nats.go", m("vocab")},
		"taskstate":            {"time", m("broker")},
		"vocab":                {"strings", m("broker")},
		"broker/natsbroker":    {m("broker"), m("taskstate/natskv")},
		"broker/asynqbroker":   {m("broker")},
		"taskstate/natskv":     {m("taskstate")},
		"taskstate/redisstate": {m("taskstate"), m("internal/redissub")},
		"internal/redissub":    {"context", m("broker/natsbroker")},
		"taskstate/statetest":  {m("taskstate")},
		"producer":             {m("broker"), m("taskstate"), m("producer/internal/x")},
		"producer/internal/x":  {m("consumer")},
		"consumer":             {m("mcpfront"), m("internal/cli")},
		"mcpfront":             {m("producer"), m("taskstate/natskv"), m("backend"), m("backend/natsbackend")},
		"backend/natsbackend":  {m("backend"), m("broker/natsbroker")},
		"internal/cli":         {m("backend/natsbackend")},
		"backend":              {m("broker/natsbroker"), m("taskstate/redisstate")},
		"cmd/api":              {m("backend"), m("broker/natsbroker")},
		"integration":          {m("taskstate/natskv")},
		"examples/demo":        {m("broker/asynqbroker")},
		"telemetry":            {m("broker"), "github.com/prometheus/client_golang/prometheus"},
		"gosdk":                {m("bridge"), goSDK + "/mcp"},
		"bridge":               {m("consumer"), goSDK + "/jsonrpc"},
		"worker":               {m("consumer"), m("gosdk"), m("internal/cli")},
		"examples/gosdk":       {m("gosdk"), goSDK + "/mcp"},
	}
	got := strings.Join(check(g), "\n")
	for _, want := range []string{
		"broker must import only the standard library, but imports github.com/nats-io/nats.go",
		"taskstate must import only the standard library, but imports " + m("broker"),
		"vocab must import only the standard library, but imports " + m("broker"),
		"broker must import only the standard library, but imports " + m("vocab"),
		"broker/natsbroker may import from this module only " + m("broker") + " and internal helpers, but imports " + m("taskstate/natskv"),
		"broker/natsbroker must not reach taskstate/natskv: broker/natsbroker → taskstate/natskv",
		"taskstate/redisstate must not reach broker: taskstate/redisstate → ",
		"taskstate/redisstate must not reach broker/natsbroker: taskstate/redisstate → internal/redissub → broker/natsbroker",
		"producer must never import consumer, but does: producer → producer/internal/x → consumer",
		"producer must never import mcpfront, but does: producer → producer/internal/x → consumer → mcpfront",
		"consumer must never import mcpfront, but does: consumer → mcpfront",
		"consumer must never import producer, but does: consumer → mcpfront → producer",
		"mcpfront must never import consumer, but does: mcpfront → producer → producer/internal/x → consumer",
		"mcpfront imports the concrete implementation " + m("taskstate/natskv"),
		"mcpfront reaches taskstate/redisstate: mcpfront → backend → taskstate/redisstate",
		"mcpfront reaches backend/natsbackend: mcpfront → backend/natsbackend",
		"backend may import only " + m("broker") + ", " + m("taskstate") + " and the standard library, but imports " + m("broker/natsbroker"),
		"consumer imports " + m("internal/cli") + "; only cmd/, worker and integration/ may",
		"examples/demo imports the concrete implementation " + m("broker/asynqbroker"),
		"telemetry must import no package of this module, but imports " + m("broker"),
		"bridge imports " + goSDK + "/jsonrpc; only gosdk (and examples/, integration/) may",
		"worker reaches go-sdk through gosdk: worker → gosdk",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing violation %q; got:\n%s", want, got)
		}
	}
	for _, fine := range []string{"cmd/api imports", "integration imports", "backend/natsbackend imports", "worker imports", "statetest may import", "taskstate/redisstate may import", "gosdk imports", "examples/gosdk", "prometheus"} {
		if strings.Contains(got, fine) {
			t.Errorf("allowed import reported (%q):\n%s", fine, got)
		}
	}
}

// TestPlantedViolations takes the module's real graph, which must be clean,
// adds one offending import at a time, and expects check to report it by
// name: the rules hold for the packages as they are, not only for a made-up
// module.
func TestPlantedViolations(t *testing.T) {
	t.Parallel()
	base := load(t)
	if bad := check(base); len(bad) > 0 {
		t.Fatalf("the module breaks the layout before anything is planted:\n%s", strings.Join(bad, "\n"))
	}
	m := func(p string) string { return module + "/" + p }
	for _, plant := range []struct{ from, imp, want string }{
		{"auth", m("mcpfront"), "auth must import only the standard library, but imports " + m("mcpfront")},
		{"client", m("vocab"), "client must import only the standard library and " + m(mcpwire) + ", but imports " + m("vocab")},
		{"client", goSDK + "/mcp", "client must import only the standard library and " + m(mcpwire) + ", but imports " + goSDK + "/mcp"},
		{mcpwire, m("vocab"), mcpwire + " must import only the standard library, but imports " + m("vocab")},
		{mcpwire, "github.com/google/jsonschema-go/jsonschema", mcpwire + " must import only the standard library, but imports github.com/google/jsonschema-go/jsonschema"},
		{"auth", "github.com/golang-jwt/jwt/v5", "auth must import only the standard library, but imports github.com/golang-jwt/jwt/v5"},
		{"auth/jwtauth", m("mcpfront"), "auth/jwtauth may import from this module only " + m("auth") + " and internal leaves, but imports " + m("mcpfront")},
		{"auth/authtest", m("taskstate"), "auth/authtest may import from this module only " + m("auth") + " and internal leaves, but imports " + m("taskstate")},
		{"auth/jwtauth", m("internal/testenv"), "auth/jwtauth may import from this module only " + m("auth") + " and internal leaves, but imports " + m("internal/testenv")},
		{"telemetry", m("broker"), "telemetry must import no package of this module, but imports " + m("broker")},
		{"telemetry", m("taskstate"), "telemetry must import no package of this module, but imports " + m("taskstate")},
		{"cmd/api", m("examples/conformance/fixtures"), "cmd/api imports " + m("examples/conformance/fixtures") + "; nothing may import an example but the example itself"},
		{"internal/demo", m("examples/gosdk-worker"), "internal/demo imports " + m("examples/gosdk-worker") + "; nothing may import an example but the example itself"},
		{"examples/gosdk-worker", m("examples/conformance/fixtures"), "examples/gosdk-worker imports " + m("examples/conformance/fixtures") + "; nothing may import an example but the example itself"},
		{"broker", m("taskstate"), "broker must import only the standard library, but imports " + m("taskstate")},
		{"consumer", m("mcpfront"), "consumer must never import mcpfront, but does: consumer → mcpfront"},
		{"backend", natsServer + "/server", "backend imports " + natsServer + "/server; only internal/embednats (and internal/natstest, integration/) may"},
		{"worker", m("internal/embednats"), "worker reaches nats-server: worker → internal/embednats"},
		{"backend/natsbackend", m("internal/embednats"), "backend/natsbackend reaches nats-server: backend/natsbackend → internal/embednats"},
		{"backend", m("broker/natsbroker"), "backend may import only " + m("broker") + ", " + m("taskstate") + " and the standard library, but imports " + m("broker/natsbroker")},
		{"backend", "github.com/rs/zerolog", "backend may import only " + m("broker") + ", " + m("taskstate") + " and the standard library, but imports github.com/rs/zerolog"},
		{"consumer", m("backend/natsbackend"), "consumer reaches backend/natsbackend: consumer → backend/natsbackend"},
		{"mcpfront", m("internal/cli"), "mcpfront imports " + m("internal/cli") + "; only cmd/, worker and integration/ may"},
	} {
		if _, ok := base[plant.from]; !ok {
			t.Errorf("planting %s → %s: package %s not in the module", plant.from, plant.imp, plant.from)
			continue
		}
		g := maps.Clone(base)
		g[plant.from] = append(slices.Clone(base[plant.from]), plant.imp)
		if got := check(g); !slices.Contains(got, plant.want) {
			t.Errorf("planted %s → %s: want the violation %q; got:\n%s", plant.from, plant.imp, plant.want, strings.Join(got, "\n"))
		}
	}
}
