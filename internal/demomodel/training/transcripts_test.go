package training_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/demomodel"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/demomodel/training/trainingtest"
	"github.com/lloyal-ai/lloyal/internal/demomodel/transcript"
)

// The transcripts are what the committed demo model trained on, byte for
// byte: written from the research harness file
// (harness/builtin/research.yaml) with the model's own chat format and
// tokenizer (its share of free context counted in its tokens), every
// transcript's role, fact, question and pieces — the spine of system
// prompt and tool schemas, the task, each call and result — and whether
// the model learns each piece. A word changed in the file's prompts, tools
// or tasks is a prompt the model never saw: these digests change, and the
// model is to be trained again (docs/demo-model.md) and the digests with
// it. The whole handbook's, as the model was trained (--seed 1 --spans
// 6000), takes a minute: -short checks a part of it.
func TestTranscriptsAreWhatTheDemoModelTrainedOn(t *testing.T) {
	base, err := demomodel.Path(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    training.Options
		n    int
		sum  string
	}{
		{"a part of the handbook", training.Options{Seed: 1, Spans: 20, Handbook: trainingtest.Handbook(t)}, 124, "f4d8021f693722ed26edcf9cc309d58253a6d9e6e5b9d57264da51233b42ab71"},
		{"the whole handbook", training.Options{Seed: 1, Spans: 6000}, 10992, "4dcf56daac3c514fa615c7088b1507cbdb78f56bb4e4f0cb7cdfa177b04df358"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Handbook == nil && testing.Short() {
				t.Skip("slow: writes every transcript of the demo model's training (-short checks a part of the handbook)")
			}
			h := sha256.New()
			n := 0
			err := training.EachTranscript(t.Context(), base, c.o, func(tr transcript.Transcript, held bool) error {
				n++
				fmt.Fprintf(h, "%s\x00%t\x00%s\x00%s\x00%s\x00", tr.Role, held, tr.Fact.ID, tr.Question, tr.Read)
				for _, p := range tr.Pieces {
					fmt.Fprintf(h, "%t\x00", p.Model)
					for _, s := range p.Prompt {
						fmt.Fprintf(h, "%t\x00%d\x00%s", s.Special, len(s.Text), s.Text)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum := hex.EncodeToString(h.Sum(nil)); n != c.n || sum != c.sum {
				t.Fatalf("%d transcripts, sha256 %s; the demo model trained on %d, sha256 %s", n, sum, c.n, c.sum)
			}
		})
	}
}
