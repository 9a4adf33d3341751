package training

import (
	"context"

	"github.com/lloyal-ai/lloyal/internal/demomodel/transcript"
)

// EachTranscript hands fn every transcript a training on the model at base
// with o writes (eachTranscript), and whether its fact is held out: for
// the tests of package training_test, which train with trainingtest.
func EachTranscript(ctx context.Context, base string, o Options, fn func(tr transcript.Transcript, held bool) error) error {
	var st stats
	return eachTranscript(ctx, base, o, &st, func(_ *segmentTokens, tr transcript.Transcript, held bool) error { return fn(tr, held) })
}
