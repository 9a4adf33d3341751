package llama

/*
#include <stdlib.h>
#include "llama.h"
#include "mtmd_decl.h"
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // the formats Encode accepts (and stb_image reads)
	_ "image/jpeg"
	_ "image/png"
	"os"
	"strings"
	"unsafe"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Projector is a vision projector (an "mmproj" GGUF) opened for a model
// through llama.cpp's multimodal library: it turns an image into
// embeddings the model reads in the place of tokens.
type Projector struct {
	c     *C.mtmd_context
	model *Model
	path  string
}

// Image is an image as the model reads it: the tokens its template puts
// before and after an image (a model's image markers; none for some), and
// the embeddings of the positions between, N rows of the model's width.
type Image struct {
	Before, After []Token
	N             int
	Embd          []float32
}

// OpenProjector opens the projector at path for m, encoding with threads
// threads (on the GPU when m's layers are there).
func OpenProjector(path string, m *Model, threads int) (*Projector, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("vision projector: %w", err)
	}
	if gf, err := gguf.Open(path); err != nil {
		return nil, fmt.Errorf("vision projector %s: %w", path, err)
	} else if a := gf.Architecture(); a != "clip" {
		return nil, fmt.Errorf("%s is not a vision projector (an mmproj GGUF, architecture clip): its architecture is %q; give the projector that goes with the model", path, a)
	} else if err := checkProjectorKeys(gf); err != nil {
		return nil, fmt.Errorf("vision projector %s: %w", path, err)
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	c := C.lloyal_mtmd_open(cs, m.m, C.int(max(threads, 1)), C.bool(m.offload.OnGPU()))
	if c == nil {
		return nil, fmt.Errorf("vision projector %s does not fit %s: %s", path, m.path, orUnknown(takeLog()))
	}
	p := &Projector{c: c, model: m, path: path}
	switch {
	case !bool(C.mtmd_support_vision(c)):
		p.Close()
		return nil, fmt.Errorf("%s is a projector for audio, not images: give the model's vision projector", path)
	case bool(C.mtmd_decode_use_mrope(c)):
		// M-RoPE (Qwen2-VL and later) gives an image's positions two
		// dimensions, which the branches' one-dimensional positions
		// cannot hold.
		p.Close()
		return nil, fmt.Errorf("%s places image positions in two dimensions (M-RoPE, as Qwen2-VL's): lloyal does not run such a model's images here yet; use it through a server", path)
	}
	return p, nil
}

func orUnknown(s string) string {
	s = strings.TrimLeft(s, ". \n") // a loader's progress dots
	if s == "" {
		return "llama.cpp gave no reason"
	}
	return s
}

// Path is the projector's file.
func (p *Projector) Path() string { return p.path }

// Close frees the projector.
func (p *Projector) Close() {
	if p != nil && p.c != nil {
		C.mtmd_free(p.c)
		p.c = nil
	}
}

// NonCausal says whether the model reads an image's positions with
// attention both ways (Gemma 3's), as DecodeImage then decodes them.
func (p *Projector) NonCausal() bool { return bool(C.mtmd_decode_use_non_causal(p.c)) }

// MaxImagePixels bounds an image Encode decodes: its pixels are decoded
// whole before the projector shrinks them, so a small file of a huge image
// would cost gigabytes.
const MaxImagePixels = 25_000_000

// Encode reads an image (PNG, JPEG or GIF, at most MaxImagePixels) and
// runs the projector over it. Not safe for concurrent use with the
// model's context.
func (p *Projector) Encode(data []byte) (Image, error) {
	if len(data) == 0 {
		return Image{}, errors.New("encode image: no bytes")
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	switch {
	case err != nil:
		return Image{}, fmt.Errorf("encode image: not a PNG, JPEG or GIF image lloyal can read (%v)", err)
	case cfg.Width < 1 || cfg.Height < 1 || int64(cfg.Width)*int64(cfg.Height) > MaxImagePixels:
		return Image{}, fmt.Errorf("encode image: a %s of %d×%d pixels, more than the %d an image may have: send a smaller one", format, cfg.Width, cfg.Height, MaxImagePixels)
	}
	bm := C.mtmd_helper_bitmap_init_from_buf(p.c, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)))
	if bm == nil {
		return Image{}, fmt.Errorf("encode image: not an image llama.cpp can read (%s)", orUnknown(takeLog()))
	}
	defer C.mtmd_bitmap_free(bm)
	chunks := C.mtmd_input_chunks_init()
	defer C.mtmd_input_chunks_free(chunks)
	text := C.mtmd_input_text{text: C.mtmd_default_marker(), add_special: false, parse_special: true}
	bms := []*C.mtmd_bitmap{bm}
	if rc := C.mtmd_tokenize(p.c, chunks, &text, (**C.mtmd_bitmap)(unsafe.Pointer(&bms[0])), 1); rc != 0 {
		return Image{}, fmt.Errorf("encode image: the projector could not prepare it (code %d): %s", int(rc), orUnknown(takeLog()))
	}
	var img Image
	seen := false
	nEmbd := int(C.llama_model_n_embd_inp(p.model.m)) // what the projector writes and a decode reads
	for i := range int(C.mtmd_input_chunks_size(chunks)) {
		ch := C.mtmd_input_chunks_get(chunks, C.size_t(i))
		switch C.mtmd_input_chunk_get_type(ch) {
		case C.MTMD_INPUT_CHUNK_TYPE_TEXT:
			var n C.size_t
			toks := C.mtmd_input_chunk_get_tokens_text(ch, &n)
			got := append([]Token(nil), unsafe.Slice((*Token)(unsafe.Pointer(toks)), int(n))...)
			if seen {
				img.After = append(img.After, got...)
			} else {
				img.Before = append(img.Before, got...)
			}
		case C.MTMD_INPUT_CHUNK_TYPE_IMAGE:
			n := int(C.mtmd_input_chunk_get_n_tokens(ch))
			if seen || n == 0 || int(C.mtmd_input_chunk_get_n_pos(ch)) != n {
				return Image{}, fmt.Errorf("encode image: the projector made several pieces of the image (tiles, or positions of their own): lloyal reads an image here as one run of positions; use this model through a server")
			}
			if rc := C.mtmd_encode_chunk(p.c, ch); rc != 0 {
				return Image{}, fmt.Errorf("encode image: the projector failed (code %d): %s", int(rc), orUnknown(takeLog()))
			}
			out := C.mtmd_get_output_embd(p.c)
			img.N, img.Embd, seen = n, append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(out)), n*nEmbd)...), true
		default:
			return Image{}, errors.New("encode image: the projector made audio of it")
		}
	}
	if !seen {
		return Image{}, errors.New("encode image: the projector made no image of it")
	}
	return img, nil
}

// DecodeImage writes an encoded image's embeddings (Image.Embd, n rows)
// into seq at positions pos0..pos0+n-1, keeping the logits after the
// last; with nonCausal the image's positions attend to each other both
// ways. Its cost in cells is n, as n tokens'.
func (c *Context) DecodeImage(embd []float32, n int, pos0, seq int32, nonCausal bool) error {
	nEmbd := int(C.llama_model_n_embd_inp(c.model.m))
	switch {
	case n <= 0 || len(embd) != n*nEmbd:
		return fmt.Errorf("decode image: %d floats for %d positions of width %d", len(embd), n, nEmbd)
	case nonCausal && n > c.nUbatch:
		return fmt.Errorf("decode image: the model reads an image's %d positions at once, more than a micro-batch holds (%d): this model's images are not read here yet; use it through a server", n, c.nUbatch)
	}
	// A causal image goes in a batch at a time, as its tokens would.
	c.outputs = c.outputs[:0]
	last := 0
	for at := 0; at < n; at += c.nBatch {
		k := min(c.nBatch, n-at)
		rc := C.lloyal_decode_embd(c.c, (*C.float)(unsafe.Pointer(&embd[at*nEmbd])), C.int32_t(k), C.int32_t(nEmbd), C.llama_pos(pos0+int32(at)), C.llama_seq_id(seq), C.bool(nonCausal))
		switch {
		case rc == 1:
			takeLog()
			return ErrNoKVSlot
		case rc != 0:
			return &DecodeError{Code: int(rc), Log: takeLog()}
		}
		last = k
	}
	c.outputs = append(c.outputs, make([]int8, last)...)
	c.outputs[last-1] = 1
	return nil
}

// LastOutputs is how many positions the last decode wrote (the last of
// them holds the logits after a DecodeImage).
func (c *Context) LastOutputs() int { return len(c.outputs) }
