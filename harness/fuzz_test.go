package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// Parse never panics, whatever the file holds: it returns a harness or an
// error.
func FuzzParse(f *testing.F) {
	ok, err := os.ReadFile(filepath.Join("testdata", "ok.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ok)
	f.Add(Starter())
	f.Add([]byte("roles: [a\nrun: {\n"))
	f.Add([]byte("run:\n  steps:\n    - {role: x, orchestrate: dag, agents: [{id: a, task: t, deps: [a]}]}\nroles: {x: {system: s, terminal: {name: t, schema: {type: object}}}}\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse(filepath.Join("testdata", "fuzz.yaml"), data)
		if (h == nil) == (err == nil) {
			t.Fatalf("harness %v, error %v", h, err)
		}
	})
}
