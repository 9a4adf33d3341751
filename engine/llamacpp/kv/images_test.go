package kv

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// An image among a span's tokens fills its positions with embeddings: the
// branch grows by every position, text and image, the cells count them,
// and the logits after it are those of the same embeddings decoded in
// another branch. A span whose image does not fit it, or a decode that
// fails, leaves the branch as it was.
func TestPrefillImages(t *testing.T) {
	s := newStore(t, 1024, 8)
	const n, width = 8, 64 // the tiny model's width
	rng := rand.New(rand.NewPCG(1, 2))
	embd := make([]float32, n*width)
	for i := range embd {
		embd[i] = rng.Float32()*2 - 1
	}
	span := append(append(tokens(5, 1), slices.Repeat([]Token{-1}, n)...), tokens(3, 2)...)
	var rows [][]float32
	for range 2 {
		b, err := s.Create()
		must(t, err)
		before := s.CellsUsed()
		must(t, s.PrefillImages(b, span, []Image{{At: 5, N: n, Embd: embd}}))
		if b.Pos() != len(span) || s.CellsUsed()-before != len(span) || !b.HasLogits() {
			t.Fatalf("branch at %d, %d cells more, logits %v; want %d", b.Pos(), s.CellsUsed()-before, b.HasLogits(), len(span))
		}
		rows = append(rows, slices.Clone(b.logits))
	}
	if !slices.Equal(rows[0], rows[1]) {
		t.Error("the same span with the same image gave other logits")
	}
	// Another image gives other logits.
	b, err := s.Create()
	must(t, err)
	other := slices.Clone(embd)
	other[0] += 1
	must(t, s.PrefillImages(b, span, []Image{{At: 5, N: n, Embd: other}}))
	if slices.Equal(rows[0], b.logits) {
		t.Error("another image gave the same logits")
	}

	// An image of more positions than a batch goes in a batch at a time;
	// one the model reads both ways at once must fit a batch.
	big := make([]float32, 100*width)
	for i := range big {
		big[i] = rng.Float32()*2 - 1
	}
	long := append(tokens(2, 4), slices.Repeat([]Token{-1}, 100)...)
	d, err := s.Create()
	must(t, err)
	must(t, s.PrefillImages(d, long, []Image{{At: 2, N: 100, Embd: big}}))
	if d.Pos() != 102 || !d.HasLogits() {
		t.Fatalf("a 100-position image in batches of 64: branch at %d, logits %v", d.Pos(), d.HasLogits())
	}
	e, err := s.Create()
	must(t, err)
	if err := s.PrefillImages(e, long, []Image{{At: 2, N: 100, Embd: big, NonCausal: true}}); err == nil || e.Pos() != 0 {
		t.Fatalf("a 100-position image read both ways went into batches of 64 (%v)", err)
	}

	c, err := s.Create()
	must(t, err)
	must(t, s.Prefill([]Span{{Branch: c, Tokens: tokens(4, 3)}}))
	pos, cells, logits := c.Pos(), s.CellsUsed(), slices.Clone(c.logits)
	for _, bad := range []Image{
		{At: 10, N: n, Embd: embd},        // past the span's end
		{At: 5, N: n, Embd: embd[:width]}, // fewer floats than positions
	} {
		if err := s.PrefillImages(c, span, []Image{bad}); err == nil {
			t.Fatalf("an image at %d of %d positions (%d floats) went in", bad.At, bad.N, len(bad.Embd))
		} else if c.Pos() != pos || s.CellsUsed() != cells || !slices.Equal(c.logits, logits) {
			t.Fatalf("%v: the branch moved from %d to %d (%d cells to %d)", err, pos, c.Pos(), cells, s.CellsUsed())
		} else if !strings.Contains(err.Error(), "image") {
			t.Errorf("error %v does not say it was the image", err)
		}
	}
}
