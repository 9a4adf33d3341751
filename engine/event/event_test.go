package event

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// declaredTypes reads event.go and returns every constant of type Type.
func declaredTypes(t *testing.T) map[string]Type {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Type{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Type" {
				continue
			}
			for i, n := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = Type(v)
			}
		}
	}
	return out
}

// A type added to the vocabulary without a catalog entry (its kind for the
// replay index, whether the log shows it) fails here.
func TestEveryTypeIsInTheCatalog(t *testing.T) {
	decl := declaredTypes(t)
	if len(decl) < 30 {
		t.Fatalf("read only %d types from event.go", len(decl))
	}
	seen := map[Type]string{}
	for name, typ := range decl {
		if other, dup := seen[typ]; dup {
			t.Errorf("%s and %s are both %q", name, other, typ)
		}
		seen[typ] = name
		if !typ.Known() {
			t.Errorf("%s (%q) is not in the catalog", name, typ)
		}
	}
	for _, typ := range Types() {
		if _, ok := seen[typ]; !ok {
			t.Errorf("the catalog lists %q, which event.go does not declare", typ)
		}
	}
}

// The vocabulary is what every package speaks, the engine included: it
// must not import any of them (nor anything outside the standard library,
// whose import paths have no dot in their first element).
func TestStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files here: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: package event imports the standard library only", name, path)
			}
		}
	}
}
