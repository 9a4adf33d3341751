package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

// seeing is the scripted double as a model that reads images: each image
// is three positions, and one whose bytes start "bad" cannot be read.
type seeing struct {
	*enginetest.Scripted
	spans []engine.Span
}

func (s *seeing) CanSee() bool { return true }
func (s *seeing) ReadImage(data []byte) (engine.ImagePiece, error) {
	if bytes.HasPrefix(data, []byte("bad")) {
		return engine.ImagePiece{}, errors.New("not an image the projector reads")
	}
	return engine.ImagePiece{N: 3, Embd: make([]float32, 3*4)}, nil
}
func (s *seeing) Prefill(spans []engine.Span) error {
	s.spans = append(s.spans, spans...)
	// The double reads tokens as text: an image's positions are <unk>.
	plain := make([]engine.Span, len(spans))
	for i, sp := range spans {
		plain[i] = engine.Span{Branch: sp.Branch, Tokens: slices.Clone(sp.Tokens)}
		for j, t := range plain[i].Tokens {
			if t == engine.ImageToken {
				plain[i].Tokens[j] = 0
			}
		}
	}
	return s.Scripted.Prefill(plain)
}

// The images a result shows a model here follow it in a user turn: each
// readable one as its positions (ImageToken in the span, the image in
// Span.Images), one the projector cannot read named as not shown, with
// why; the same bytes shown twice keep one id; the prefill's data lists
// what was shown, and KeepImage is given each image's bytes.
func TestImagesFollowTheResult(t *testing.T) {
	be := &seeing{Scripted: enginetest.New(4096)}
	be.Script("look", enginetest.ToolCall("look", `{}`), enginetest.ToolCall("look", `{}`), enginetest.ToolCall("report", `{"result": "seen"}`))
	look := engine.Typed(engine.ToolSpec{Name: "look", Description: "Look.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, struct{}) (any, error) {
			return map[string]any{"_attachments": []map[string]any{
				{"name": "a.png", "mimeType": "image/png", "data": []byte("png-a")},
				{"name": "b.png", "mimeType": "image/png", "data": []byte("bad-b")},
			}, "_images": "a tool may not name what the model sees"}, nil
		})
	var kept [][]byte
	var events []event.Event
	rt := engine.New(be, engine.Options{KeepImage: func(d []byte) error { kept = append(kept, d); return nil },
		Sinks: []engine.Sink{engine.SinkFunc(func(e event.Event) { events = append(events, e) })}})
	if _, err := rt.Run(context.Background(), engine.PoolSpec{System: "You look.", Tools: []engine.Tool{look}, MaxTurns: 4,
		Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "look"})}); err != nil {
		t.Fatal(err)
	}
	var prefills []event.Event
	for _, e := range events {
		if e.Type == event.BranchPrefill && e.Role == "toolResult" {
			prefills = append(prefills, e)
		}
	}
	if len(prefills) != 2 {
		t.Fatalf("%d results written", len(prefills))
	}
	for i, e := range prefills {
		var im event.PrefillImages
		if err := json.Unmarshal(e.Data, &im); err != nil || len(im.Images) != 1 || im.Images[0].ID != "image-1" || im.Images[0].Positions != 3 {
			t.Fatalf("result %d lists %s (%v)", i+1, e.Data, err)
		}
		if n := slices.Index(e.IDs, engine.ImageToken); n < 0 || !slices.Equal(e.IDs[n:n+3], []engine.Token{-1, -1, -1}) || slices.Contains(e.IDs[n+3:], engine.ImageToken) {
			t.Fatalf("result %d ids %v", i+1, e.IDs)
		}
		if !strings.Contains(e.Text, "image-2: not shown (not an image the projector reads)") || !strings.Contains(e.Text, "[image image-1: a.png, 5 bytes, 3 positions]") {
			t.Fatalf("result %d reads %q", i+1, e.Text)
		}
	}
	var withImages []engine.Span
	for _, sp := range be.spans {
		if len(sp.Images) > 0 {
			withImages = append(withImages, sp)
		}
	}
	if len(withImages) != 2 || withImages[0].Images[0].N != 3 || withImages[0].Tokens[withImages[0].Images[0].At] != engine.ImageToken {
		t.Fatalf("spans with images: %+v", withImages)
	}
	if len(kept) != 2 || string(kept[0]) != "png-a" {
		t.Fatalf("kept %q", kept)
	}
}
