package bench

import _ "embed"

// tuningQuestions are the questions retrieval and research are tuned on
// (lloyal bench rerank asks them), kept apart from the held-out
// demoQuestions (see the file's header).
//
//go:embed tuning-questions.tsv
var tuningQuestions string
