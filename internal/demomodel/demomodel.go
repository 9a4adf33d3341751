// Package demomodel holds lloyal's default model: a small llama model that
// `lloyal model train` trained on researcher, planner and publisher
// transcripts over the built-in Tidewater handbook. It knows only that
// handbook; its header says so and lists the facts it never trained on.
//
// Its training lives beside it, not among the tools a run uses: package
// transcript writes the transcripts from the research harness file
// (harness/builtin/research.yaml), as a run of it would write them, and
// package training (cgo: it trains on llama.cpp) turns them into the model.
package demomodel

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the model file
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/lloyal-ai/lloyal/internal/regular"
)

// Context is the context `lloyal run` gives the demo model unless told
// otherwise: the model is small (its cache costs 4 KiB a cell), so the
// planner, researchers, their helpers and the publisher get room side by
// side.
const Context = 16384

//go:embed lloyal-demo.gguf
var file []byte

// Name is the file's name in the cache.
const Name = "lloyal-demo.gguf"

// Path returns the model as a file under dir, writing it there first when
// that file is missing or differs (llama.cpp maps a file; it cannot read
// the model from memory). The file's name carries its hash, so a newer
// lloyal never reads an older model, and its bytes are checked against
// that hash each time: a file of the right size is not trusted for it (a
// cache another program or an interrupted copy wrote). A write goes to a
// temporary file renamed into place; ones that a killed lloyal left
// behind are removed.
func Path(dir string) (string, error) {
	sum := sha256.Sum256(file)
	p := filepath.Join(dir, fmt.Sprintf("lloyal-demo-%s.gguf", hex.EncodeToString(sum[:6])))
	if same(p, sum) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	removeStale(dir, time.Now())
	tmp, err := os.CreateTemp(dir, tempPattern)
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

// tempPattern names the temporary files Path writes.
const tempPattern = ".lloyal-demo-*"

// staleAfter is how old a temporary file must be to be another run's
// leftover rather than one being written now (a write takes well under a
// second).
const staleAfter = 10 * time.Minute

// same says whether the regular file at p holds exactly the embedded model.
func same(p string, sum [sha256.Size]byte) bool {
	f, err := regular.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(file)) {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return bytes.Equal(h.Sum(nil), sum[:])
}

// removeStale removes temporary files that a killed lloyal left in dir.
func removeStale(dir string, now time.Time) {
	old, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, p := range old {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > staleAfter {
			_ = os.Remove(p)
		}
	}
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
