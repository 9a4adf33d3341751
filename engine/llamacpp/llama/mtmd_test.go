package llama

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// testPNG is a w×h PNG of a gradient.
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 11), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A generated projector opens for the model whose width it projects to:
// an image of any shape becomes (image size / patch size)² positions of the
// model's width, the same bytes the same embeddings; bytes that are no
// image, and a projector for another width, are refused with why.
func TestProjectorEncodesAnImage(t *testing.T) {
	dir := t.TempDir()
	proj, m := tinyProjector(t)
	p, err := OpenProjector(proj, m, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, size := range [][2]int{{40, 20}, {32, 32}, {7, 90}} {
		im, err := p.Encode(testPNG(t, size[0], size[1]))
		if err != nil || im.N != 16 || len(im.Embd) != 16*64 {
			t.Fatalf("%v: %d positions, %d floats (%v)", size, im.N, len(im.Embd), err)
		}
	}
	a, _ := p.Encode(testPNG(t, 40, 20))
	b, _ := p.Encode(testPNG(t, 40, 20))
	c, _ := p.Encode(testPNG(t, 20, 40))
	if !slices.Equal(a.Embd, b.Embd) || slices.Equal(a.Embd, c.Embd) {
		t.Error("the same image did not give the same embeddings, or another gave the same")
	}
	if _, err := p.Encode([]byte("not an image")); err == nil || !strings.Contains(err.Error(), "not a PNG, JPEG or GIF image") {
		t.Errorf("text as an image: %v", err)
	}
	// A small file that says it is a huge image is refused before any
	// pixel is decoded.
	huge := testPNG(t, 4, 4)
	binary.BigEndian.PutUint32(huge[16:], 20000) // IHDR's width and height
	binary.BigEndian.PutUint32(huge[20:], 20000)
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	if _, err := p.Encode(huge); err == nil || !strings.Contains(err.Error(), "20000×20000 pixels") {
		t.Errorf("a 20000×20000 PNG: %v", err)
	}

	wide := modelgen.TinyProjector()
	wide.TextEmbd = 128
	other := filepath.Join(dir, "wide.mmproj.gguf")
	if err := modelgen.WriteProjectorFile(other, wide); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenProjector(other, m, 1); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("a projector for another width: %v", err)
	}
	if _, err := OpenProjector(filepath.Join(dir, "missing.gguf"), m, 1); err == nil {
		t.Error("a missing projector opened")
	}
}

// A projector whose keys clip.cpp would abort on (a key of another type
// than its getter's, a vision projector without its image mean) is refused
// by name before llama.cpp reads it.
func TestAProjectorClipWouldAbortOnIsRefused(t *testing.T) {
	proj, m := tinyProjector(t)
	for _, c := range []struct {
		name string
		set  map[string]any
		drop []string
		want string
	}{
		{"an int32 image size", map[string]any{"clip.vision.image_size": int32(32)}, nil, "clip.vision.image_size is int32, where clip.cpp reads uint32"},
		{"no image mean", nil, []string{"clip.vision.image_mean"}, "it has no clip.vision.image_mean"},
		{"a short image std", map[string]any{"clip.vision.image_std": []float32{1}}, nil, "clip.vision.image_std is []float32 [1]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenProjector(testmodel.RewriteFrom(t, proj, c.set, c.drop...), m, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

// tinyProjector writes the tiny projector and loads the tiny model it fits
// (closed when the test ends).
func tinyProjector(t *testing.T) (string, *Model) {
	t.Helper()
	proj := filepath.Join(t.TempDir(), "tiny.mmproj.gguf")
	if err := modelgen.WriteProjectorFile(proj, modelgen.TinyProjector()); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(testmodel.Tiny(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return proj, m
}
