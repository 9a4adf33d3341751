package cli

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/trace"
)

// A model here that sees: lloyal model tiny --vision writes a model and
// its projector; a run given a PNG (--attach) and the projector (--mmproj)
// shows the image to the model through read_attachment as its
// embeddings, counted in the agent's cells; the trace lists it with the
// positions it filled and keeps its bytes; a rerun shows it again, token
// for token, and one with another projector is refused.
func TestAModelHereSeesAnImage(t *testing.T) {
	bin := lloyalBinary(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	model := filepath.Join(dir, "seeing.gguf")
	out, err := lloyalCmd(bin, dir, cache, "model", "tiny", "--vision", "-o", model).CombinedOutput()
	proj := filepath.Join(dir, "seeing.mmproj.gguf")
	if err != nil || !strings.Contains(string(out), "wrote "+proj) {
		t.Fatalf("model tiny --vision: %v\n%s", err, out)
	}
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := range 48 {
		img.Set(x, x%32, color.RGBA{200, 30, 30, 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(dir, "chart.png")
	if err := os.WriteFile(chart, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	h := lookHarness(t, dir, "", 1)
	rec := filepath.Join(dir, "run.jsonl")
	args := []string{"run", h, "--headless", "--model", model, "--mmproj", proj, "--walk", "--ctx", "4096", "--threads", "1", "--temperature", "0", "--attach", chart, "--trace", rec}
	if out, err := lloyalCmd(bin, dir, cache, args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	ck, err := trace.CheckFile(rec)
	if err != nil || ck.Header.Context.Projector != proj || len(ck.Header.Context.ProjectorSHA256) != 64 {
		t.Fatalf("header context %+v (%v)", ck.Header.Context, err)
	}
	var shown []event.ShownImage
	if _, _, err := trace.Follow(t.Context(), rec, false, func(e event.Event) error {
		switch {
		case e.Type == event.ToolResult && strings.Contains(string(e.Result), "_imageError"):
			t.Errorf("a model that sees was told it cannot: %s", e.Result)
		case e.Type == event.BranchPrefill && len(e.Data) > 0:
			var im event.PrefillImages
			if err := json.Unmarshal(e.Data, &im); err != nil {
				t.Fatal(err)
			}
			holes := 0
			for _, id := range e.IDs {
				if id == -1 {
					holes++
				}
			}
			if len(im.Images) != 1 || holes != im.Images[0].Positions || e.Tokens != len(e.IDs) || !strings.Contains(e.Text, "[image image-") {
				t.Errorf("prefill %d tokens, %d image positions, data %s, text %q", e.Tokens, holes, e.Data, e.Text)
			}
			shown = append(shown, im.Images...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 2 || shown[0].Positions != 16 || shown[0].Name != "chart.png" {
		t.Fatalf("images shown: %+v", shown)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.attachments", shown[0].SHA256)); err != nil {
		t.Fatalf("the image is not kept beside the trace: %v", err)
	}

	out, err = lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--harness", h, "--headless", "--trace", filepath.Join(dir, "again.jsonl")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "token for token") {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	p := modelgen.TinyProjector()
	p.Seed = 9
	if err := modelgen.WriteProjectorFile(proj, p); err != nil {
		t.Fatal(err)
	}
	out, err = lloyalCmd(bin, t.TempDir(), cache, "rerun", rec, "--harness", h, "--headless").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not the file the recorded run read images with") {
		t.Fatalf("a rerun with another projector: %v\n%s", err, out)
	}
	// A projector made for another model is refused before the run.
	p.TextEmbd = 128
	if err := modelgen.WriteProjectorFile(proj, p); err != nil {
		t.Fatal(err)
	}
	out, err = lloyalCmd(bin, dir, cache, append(args[:len(args)-1], filepath.Join(dir, "bad.jsonl"))...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not fit") || strings.Contains(string(out), "panic") {
		t.Fatalf("a projector for another model: %v\n%s", err, out)
	}
}
