package bench

import (
	"path/filepath"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// The server bench's "(spine cached)" pass is like for like with the local
// spine-cached row only if its tasks are as long as the first pass's and
// share no prefix with them: a prompt cache then finds the spine and
// nothing of the task.
func TestServerTasksAreNewFromTheirFirstToken(t *testing.T) {
	tiny := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(tiny, modelgen.Tiny()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"generated tiny model", func(*testing.T) string { return tiny }},
		{"phi-3's vocabulary (llama134m.gguf's)", func(t *testing.T) string {
			return filepath.Join(testmodel.SharedModels(t), "ggml-vocab-phi-3.gguf")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := llamabackend.Open(c.path(t), model.Options{VocabOnly: true}, llamabackend.FormatOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i := 1; i <= 32; i++ {
				first, err := m.TokenizeContent(serverTask(firstTasks, i))
				if err != nil {
					t.Fatal(err)
				}
				again, err := m.TokenizeContent(serverTask(newTasks, i))
				if err != nil {
					t.Fatal(err)
				}
				if len(first) != len(again) || len(first) == 0 || first[0] == again[0] {
					t.Fatalf("agent %d: %v against %v: the tasks must be as long and differ from their first token", i, first, again)
				}
			}
		})
	}
}
