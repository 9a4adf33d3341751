package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `lloyal model train` prints a loss per step and writes the same file for
// the same seed, and a different one for another seed.
func TestModelTrainIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	run := func(name, seed string) (string, []byte) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		path := filepath.Join(dir, name)
		root.SetArgs([]string{"model", "train", "-o", path, "--steps", "3", "--ctx", "32", "--batch", "1", "--threads", "1", "--warmup", "1", "--seed", seed})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), b
	}
	log, a := run("a.gguf", "5")
	_, b := run("b.gguf", "5")
	_, c := run("c.gguf", "6")
	if !strings.Contains(log, "step 3/3  loss ") || !strings.Contains(log, "tok/s") {
		t.Fatalf("no per-step loss in the output:\n%s", log)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed wrote different models")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds wrote the same model")
	}
}

func TestModelTrainRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-o FILE"},
		{[]string{"-o", "x.gguf", "--preset", "huge"}, `--preset "huge"`},
		{[]string{"-o", "x.gguf", "--ctx", "100000"}, "--ctx 100000"},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"model", "train"}, c.args...))
		if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
}
