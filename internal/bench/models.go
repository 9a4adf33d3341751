package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// openModel opens the GGUF file ref or, where ref is empty, the generated
// model name of shape o (cachedModel).
func openModel(ref, name string, o modelgen.Options) (*model.Model, error) {
	if ref == "" {
		p, err := cachedModel(name, o)
		if err != nil {
			return nil, err
		}
		ref = p
	}
	return llamabackend.Open(ref, model.Options{}, llamabackend.FormatOptions{})
}

// cachedModel returns a generated model from the user's cache dir, writing it
// on first use (and saying so on stderr: the ~0.5B model takes a while).
func cachedModel(name string, o modelgen.Options) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "lloyal", "models", fmt.Sprintf("%s-%d.gguf", name, o.Params()))
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s (%.1fM random parameters) at %s …\n", name, float64(o.Params())/1e6, p)
	if err := modelgen.WriteFile(p, o); err != nil {
		return "", err
	}
	return p, nil
}
