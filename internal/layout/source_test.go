package layout_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the module may be (test files,
// examples and integration aside): a longer one does several things, and
// reads better as one function for each.
const maxFuncLines = 100

// No non-test function outside examples/ and integration/ is longer than
// maxFuncLines lines, from its func keyword to its closing brace (gofmt'd
// source).
func TestShortFunctions(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules"),
				path == filepath.Join(root, "examples"), path == filepath.Join(root, "integration"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: func %s is %d lines; split it (at most %d)", rel, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A worker in a module of its own (examples/external-worker, built as a
// user's module would be) does not depend on nats-server: its go list
// -deps holds no package of it.
func TestWorkerModuleWithoutNATSServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on another module")
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "external-worker")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps in examples/external-worker: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/mcpqueue/mcpqueue/worker") {
		t.Fatalf("go list -deps in examples/external-worker does not list the worker package:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, natsServer) {
			t.Errorf("examples/external-worker depends on %s", line)
		}
	}
}
