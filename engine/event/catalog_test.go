package event

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// declaredOrder reads event.go and returns its Type constants in order.
func declaredOrder(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Type" {
				for _, name := range vs.Names {
					out = append(out, name.Name)
				}
			}
		}
		return true
	})
	return out
}

// The trace format document is generated from the catalog: every type needs
// its sentence and an example, and every key an example fills needs a
// meaning. A key documented for a type that is not a key of Event, or a
// type listed out of declaration order, fails too.
func TestEveryTypeIsDocumented(t *testing.T) {
	decl := declaredTypes(t)
	var want []Type
	for _, name := range declaredOrder(t) {
		want = append(want, decl[name])
	}
	if got := Types(); !slices.Equal(got, want) {
		t.Errorf("the catalog's order is not event.go's:\n got %v\nwant %v", got, want)
	}
	for _, e := range entries {
		if strings.TrimSpace(e.doc) == "" {
			t.Errorf("%s: no doc", e.typ)
		}
		if e.example.Type != "" || e.example.ID != 0 || e.example.At != 0 || !e.example.Wall.IsZero() {
			t.Errorf("%s: the example sets its envelope (Docs' caller fills it)", e.typ)
		}
		shown := map[string]bool{}
		for _, f := range e.fieldsOf(e.example) {
			shown[f.Key] = true
			if f.Meaning == "" {
				t.Errorf("%s: key %q has no meaning (add it to fieldDocs or the entry's fields)", e.typ, f.Key)
			}
		}
		for k := range e.fields {
			if !shown[k] {
				t.Errorf("%s: fields documents %q, which is not a key of an event line (or is its envelope)", e.typ, k)
			}
		}
	}
	rt := reflect.TypeFor[Event]()
	for i := range rt.NumField() {
		key, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if fieldDocs[key] == "" {
			t.Errorf("Event key %q has no general meaning in fieldDocs", key)
		}
	}
	for _, f := range Envelope() {
		if f.Meaning == "" {
			t.Errorf("envelope key %q has no meaning", f.Key)
		}
	}
}
