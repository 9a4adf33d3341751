package demomodel

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Path writes the model once, under a name carrying its hash, and its
// header says what it is: a model trained on the Tidewater handbook only,
// with the facts it never saw listed for the benchmark.
func TestPathWritesTheModelOnceAndItsHeaderSaysWhatItIs(t *testing.T) {
	dir := t.TempDir()
	p, err := Path(filepath.Join(dir, "models"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(p), "lloyal-demo-") {
		t.Errorf("path %s", p)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != int64(len(file)) {
		t.Fatalf("written file: %v %v", fi, err)
	}
	if fi.Size() > 20<<20 {
		t.Errorf("the demo model is %d bytes, over 20 MiB", fi.Size())
	}
	// A second call keeps the file it finds.
	if err := os.Chtimes(p, fi.ModTime().Add(-1e9), fi.ModTime().Add(-1e9)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	if again, err := Path(filepath.Join(dir, "models")); err != nil || again != p {
		t.Fatalf("second Path = %s, %v", again, err)
	}
	if after, _ := os.Stat(p); !after.ModTime().Equal(before.ModTime()) {
		t.Error("a second Path wrote the file again")
	}
	// A cut file (a full disk, an old copy) is written again.
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(filepath.Join(dir, "models")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != int64(len(file)) {
		t.Errorf("a cut file was kept: %d bytes", fi.Size())
	}

	// A file of the right size with other bytes (a cache another program
	// or a cut copy wrote) is not trusted for its size: it is written again.
	junk := make([]byte, len(file))
	copy(junk, file)
	junk[len(junk)/2] ^= 0xff
	if err := os.WriteFile(p, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(filepath.Join(dir, "models")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, file) {
		t.Error("a file of the model's size but other bytes was kept")
	}

	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := f.String("general.name")
	desc, _ := f.String("general.description")
	held, _ := f.Strings("lloyal.train.held_out")
	if !strings.Contains(name, "lloyal-demo") || !strings.Contains(desc, "Tidewater handbook only") || len(held) == 0 {
		t.Errorf("header: name %q, description %q, %d held-out facts", name, desc, len(held))
	}
}

// A temporary file that a killed lloyal left while writing the model is
// removed by the next write; one being written now (fresh) is left alone.
func TestPathRemovesTheTemporaryFilesOfAKilledWrite(t *testing.T) {
	dir := t.TempDir()
	stale, fresh := filepath.Join(dir, ".lloyal-demo-111"), filepath.Join(dir, ".lloyal-demo-222")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half a model"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the killed write's temporary file is still there")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a temporary file being written now was removed")
	}
}
