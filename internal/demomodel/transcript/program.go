package transcript

import (
	"io/fs"
	"os"

	"github.com/lloyal-ai/lloyal/harness"
)

// ResearchProgram is the research harness (harness/builtin/research.yaml)
// over handbook (nil: the built-in one), as a run of nCtx cells decoded
// nBatch tokens at a time builds it — the profiles a run of that context
// applies, not the demo model's, and fitted to it — with notes going to a
// temporary folder that done removes, its searches unranked (BM25's
// order, as when the demo model trained). The demo model's training
// transcripts are written from it, and lloyal bench researchers runs its
// researchers.
func ResearchProgram(handbook fs.FS, nCtx, nBatch int) (p *harness.Program, done func(), err error) {
	f, err := harness.Builtin("research")
	if err == nil {
		f, err = f.With(harness.Profiles(false, false, nCtx)...)
	}
	if err != nil {
		return nil, nil, err
	}
	ws, err := os.MkdirTemp("", "lloyal-handbook-notes-*")
	if err != nil {
		return nil, nil, err
	}
	p, err = f.Build(harness.Options{Workspace: ws, Handbook: handbook, Unranked: true})
	if err != nil {
		os.RemoveAll(ws)
		return nil, nil, err
	}
	p.Fit(nCtx, nBatch)
	return p, func() {
		p.Close()
		os.RemoveAll(ws)
	}, nil
}
