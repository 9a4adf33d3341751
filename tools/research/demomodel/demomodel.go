// Package demomodel holds lloyal's default model: a small llama model that
// `lloyal model train` trained on researcher, planner and publisher
// transcripts over the built-in Tidewater handbook. It knows only that
// handbook; its header says so and lists the facts it never trained on.
package demomodel

import (
	"crypto/sha256"
	_ "embed" // the model file
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed lloyal-demo.gguf
var file []byte

// Name is the file's name in the cache.
const Name = "lloyal-demo.gguf"

// Path returns the model as a file under dir, writing it there first when
// that file is missing or differs (llama.cpp maps a file; it cannot read
// the model from memory). The file's name carries its hash, so a newer
// lloyal never reads an older model.
func Path(dir string) (string, error) {
	sum := sha256.Sum256(file)
	p := filepath.Join(dir, fmt.Sprintf("lloyal-demo-%s.gguf", hex.EncodeToString(sum[:6])))
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(file)) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".lloyal-demo-*")
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(file); err != nil {
		tmp.Close()
		return "", fmt.Errorf("demo model: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return p, nil
}

// UserPath is Path in the user's cache (lloyal/models), or the temporary
// folder's when there is no cache.
func UserPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return Path(filepath.Join(dir, "lloyal", "models"))
}
