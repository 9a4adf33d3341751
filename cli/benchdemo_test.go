package cli

import "github.com/lloyal-ai/lloyal/bench"

// usesQuestionWords is what demo_test.go's tally counts with.
var usesQuestionWords = bench.UsesQuestionWords
