package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad flags are refused, naming the flag, before anything is written.
func TestModelTrainRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-o FILE"},
		{[]string{"-o", "x.gguf", "--preset", "huge"}, `--preset "huge"`},
		{[]string{"-o", "x.gguf", "--ctx", "100000"}, "--ctx 100000"},
		{[]string{"-o", "x.gguf", "--vocab", "-1"}, "--vocab -1"},
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
