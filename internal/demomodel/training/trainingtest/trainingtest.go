// Package trainingtest trains small models for tests: on a part of the
// built-in handbook, so that making the transcripts, which is most of a
// training's time, takes seconds.
package trainingtest

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lloyal-ai/lloyal/internal/demomodel/training"
	"github.com/lloyal-ai/lloyal/internal/research"
)

// pages are the handbook pages Handbook keeps whole, besides the glossary
// and the error codes.
var pages = []string{"architecture/lighthouse.md", "architecture/breakwater.md"}

// Handbook is a part of the built-in handbook, its files unchanged but cut
// short: the glossary's first dozen terms, the first two error codes and two
// pages (about thirty facts where the whole handbook has hundreds). Its
// facts' IDs are the whole handbook's, so a model trained on it can be
// asked its held-out facts by lloyal bench demo.
func Handbook(tb testing.TB) fs.FS {
	tb.Helper()
	hb := research.Handbook()
	read := func(p string) string {
		b, err := fs.ReadFile(hb, p)
		if err != nil {
			tb.Fatal(err)
		}
		return string(b)
	}
	lines := strings.SplitAfter(read("glossary.md"), "\n")
	glossary := strings.Join(lines[:min(len(lines), 18)], "") // six lines of heading, then terms
	codes := read("error-codes.md")
	if i := nthIndex(codes, "\n## TW-", 3); i > 0 {
		codes = codes[:i+1]
	}
	fsys := fstest.MapFS{
		"glossary.md":    {Data: []byte(glossary)},
		"error-codes.md": {Data: []byte(codes)},
	}
	for _, p := range pages {
		fsys[p] = &fstest.MapFile{Data: []byte(read(p))}
	}
	return fsys
}

// nthIndex is the index of the nth sep in s, or -1.
func nthIndex(s, sep string, n int) int {
	at := -1
	for range n {
		i := strings.Index(s[at+1:], sep)
		if i < 0 {
			return -1
		}
		at += 1 + i
	}
	return at
}

// Options are a small training to out: the tiny preset on Handbook's
// transcripts, 2 steps of one 96-token sequence on one thread, a 200-piece
// vocabulary.
func Options(tb testing.TB, out string) training.Options {
	return training.Options{Out: out, Preset: "tiny", Data: "transcripts", Seed: 1, Steps: 2, Ctx: 96, Batch: 1,
		Every: 50, Threads: 1, Warmup: 1, LR: 3e-3, Vocab: 200, Handbook: Handbook(tb)}
}

// Train runs a training (training.Prepare, then Train) and returns what it
// printed, failing tb on an error.
func Train(tb testing.TB, o training.Options) string {
	tb.Helper()
	log, err := TryTrain(o)
	if err != nil {
		tb.Fatalf("%v\n%s", err, log)
	}
	return log
}

// TryTrain runs a training and returns what it printed and its error.
func TryTrain(o training.Options) (string, error) {
	var out bytes.Buffer
	job, err := training.Prepare(context.Background(), o)
	if err != nil {
		return "", err
	}
	defer job.Close()
	err = job.Train(context.Background(), &out)
	return out.String(), err
}
