package research

import (
	"embed"
	"io/fs"

	"github.com/lloyal-ai/lloyal/tools"
)

// The handbook of Tidewater, a fictional job scheduler: the corpus `lloyal
// run` researches when no --corpus is given, built into the binary so the
// demo runs from any folder. It is written to be worth researching: facts
// that take two or more files to answer, values that changed between
// versions (each page says which version it applies to), external pages
// behind a rate-limited fetch, and a restricted/ folder that is off limits.
// handbook-canon.md beside this file is the writers' fact sheet.
//
//go:embed all:handbook
var handbook embed.FS

// Handbook is the built-in corpus.
func Handbook() fs.FS {
	sub, err := fs.Sub(handbook, "handbook")
	if err != nil {
		panic(err) // the folder is embedded at build time: it exists
	}
	return sub
}

// HandbookName is how runs and errors name the built-in corpus.
const HandbookName = "the built-in Tidewater handbook"

// OpenCorpus opens a folder of documents, or the built-in handbook ("").
func OpenCorpus(dir string) (*tools.Corpus, error) {
	if dir == "" {
		return tools.LoadCorpusFS(Handbook(), HandbookName)
	}
	return tools.LoadCorpus(dir)
}
