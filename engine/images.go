package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Images a tool returns (its result's _attachments, an MCP server's image
// content) reach a model that can see: each is kept by the pool under an
// id, the result the model reads names it ("_images"), and the backend
// shows the image itself beside the result (a server: an image part of the
// chat request). Where the model cannot see, the result says so instead
// ("_imageError").

// ImageReader is a Backend whose model reads images here (a vision
// projector opened beside it): the images a result shows are written into
// the agent's branch after the result, as the model's embeddings of them,
// each position a cell as a token is.
type ImageReader interface {
	Seer
	// ReadImage encodes an image as the model reads it.
	ReadImage(data []byte) (ImagePiece, error)
}

// ImagePiece is an image as a model here reads it: the tokens its template
// puts before and after an image, and N positions of embeddings (N rows of
// the model's width) between them.
type ImagePiece struct {
	Before, After []Token
	N             int
	Embd          []float32
	// NonCausal: the image's positions attend to each other both ways.
	NonCausal bool
}

// ImageToken stands in a span's tokens (and a trace's ids) for each
// position an image's embeddings fill.
const ImageToken Token = -1

// SpanImage is an image in a span: its embeddings fill Tokens[At:At+N].
type SpanImage struct {
	At, N     int
	Embd      []float32
	NonCausal bool
}

// imageMarker marks where an image goes in the text of the turn that
// shows a result's images to a model here.
const imageMarker = "<<lloyal:image>>"

// imageTurn is the user turn that shows a model here the images a tool
// result read by a named (ImagesKey), as tokens with each image's
// positions (nil when the result names none the pool holds, or the
// backend reads no images), as text for the trace, and as the images the
// trace lists (their bytes kept: Options.KeepImage). A rerun, whose
// results are served, finds the images in the record (Replay.Images).
func (p *pool) imageTurn(a *Agent, body json.RawMessage) (toks []Token, imgs []SpanImage, text string, listed []event.ShownImage, err error) {
	reader, ok := p.rt.be.(ImageReader)
	if !ok || p.rt.tb != nil || !reader.CanSee() {
		return nil, nil, "", nil, nil
	}
	var r map[string]json.RawMessage
	var named []Image
	if json.Unmarshal(body, &r) != nil || r[ImagesKey] == nil || json.Unmarshal(r[ImagesKey], &named) != nil {
		return nil, nil, "", nil, nil
	}
	var shown []Image
	var recorded []Image
	for _, n := range named {
		if !imageID.MatchString(n.ID) {
			continue // not an id the pool gives (a served result is the trace's)
		}
		i := slices.IndexFunc(p.images, func(im Image) bool { return im.ID == n.ID })
		if i < 0 && p.rt.opts.Replay != nil {
			if recorded == nil {
				if recorded, err = p.rt.opts.Replay.Images(a.ID, a.spans); err != nil {
					return nil, nil, "", nil, err
				}
			}
			if j := slices.IndexFunc(recorded, func(im Image) bool { return im.ID == n.ID }); j >= 0 {
				p.images = append(p.images, recorded[j])
				i = len(p.images) - 1
			}
		}
		if i >= 0 {
			shown = append(shown, p.images[i])
		}
	}
	if len(shown) == 0 {
		return nil, nil, "", nil, nil
	}
	// Each image is read first: one the projector cannot read is named as
	// not shown, with why, and the rest are shown.
	type read struct {
		im    Image
		piece ImagePiece
	}
	var readable []read
	var b strings.Builder
	fmt.Fprintf(&b, "The %d image(s) the tool result above names, in its order:", len(shown))
	for _, im := range shown {
		piece, err := reader.ReadImage(im.Data)
		if err != nil {
			fmt.Fprintf(&b, "\n%s: not shown (%s)", im.ID, strings.ReplaceAll(err.Error(), imageMarker, ""))
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s", im.ID, imageMarker)
		readable = append(readable, read{im, piece})
	}
	prompt := p.fmt.Turn(chat.Message{Role: chat.User, Content: b.String()}, true)
	parts := splitPrompt(prompt, imageMarker)
	if len(parts) != len(readable)+1 {
		return nil, nil, "", nil, fmt.Errorf("the chat template wrote the image marker %d times for %d images", len(parts)-1, len(readable))
	}
	var said strings.Builder
	for i, part := range parts {
		t, err := p.store.Tokenize(part)
		if err != nil {
			return nil, nil, "", nil, err
		}
		toks = append(toks, t...)
		said.WriteString(part.String())
		if i == len(parts)-1 {
			break
		}
		im, piece := readable[i].im, readable[i].piece
		if keep := p.rt.opts.KeepImage; keep != nil {
			if err := keep(im.Data); err != nil {
				return nil, nil, "", nil, fmt.Errorf("keep image %s for the trace: %w", im.ID, err)
			}
		}
		toks = append(toks, piece.Before...)
		imgs = append(imgs, SpanImage{At: len(toks), N: piece.N, Embd: piece.Embd, NonCausal: piece.NonCausal})
		for range piece.N {
			toks = append(toks, ImageToken)
		}
		toks = append(toks, piece.After...)
		sum := sha256.Sum256(im.Data)
		listed = append(listed, event.ShownImage{ID: im.ID, Name: im.Name, MIMEType: im.MIMEType, SHA256: hex.EncodeToString(sum[:]), Positions: piece.N})
		fmt.Fprintf(&said, "[image %s: %s, %d bytes, %d positions]", im.ID, im.Name, len(im.Data), piece.N)
	}
	return toks, imgs, said.String(), listed, nil
}

// imageID is an id the pool gives an image it shows (showImages).
var imageID = regexp.MustCompile(`^image-[0-9]{1,6}$`)

// splitPrompt cuts p at each occurrence of marker in its text (not in a
// special segment): len(markers)+1 parts.
func splitPrompt(p chat.Prompt, marker string) []chat.Prompt {
	parts := []chat.Prompt{nil}
	for _, s := range p {
		if s.Special {
			parts[len(parts)-1] = append(parts[len(parts)-1], s)
			continue
		}
		pieces := strings.Split(s.Text, marker)
		for i, t := range pieces {
			if i > 0 {
				parts = append(parts, nil)
			}
			if t != "" {
				parts[len(parts)-1] = append(parts[len(parts)-1], chat.Segment{Text: t})
			}
		}
	}
	return parts
}

// Seer is a backend whose model can see images (a server whose model has a
// vision projector, spoken to in chat messages).
type Seer interface {
	CanSee() bool
}

// Image is an image a tool result carried to a model that can see: ID is
// what the result names it by.
type Image struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	MIMEType string `json:"mimeType"`
	Data     []byte `json:"-"`
}

// Bounds on what a pool shows a model: images at most, and the bytes of
// one.
const (
	MaxImages     = 16
	MaxImageBytes = 8 << 20
)

// ImagesKey is the key of a tool result that names the images shown with
// it, each {"id", "name", "mimeType"}.
const ImagesKey = "_images"

// canSee reports whether the pool's model sees images.
func (rt *Runtime) canSee() bool {
	if s, ok := rt.tb.(Seer); ok && rt.tb != nil {
		return s.CanSee()
	}
	if s, ok := rt.be.(Seer); ok && rt.be != nil {
		return s.CanSee()
	}
	return false
}

// showImages keeps what a result's attachments hold that the model can be
// shown (images, within MaxImages and MaxImageBytes, where it can see) and
// writes into the result which were shown and why any were not.
func (p *pool) showImages(obj map[string]json.RawMessage, list []Attachment) {
	var shown []Image
	var why []string
	for _, l := range list {
		seen := slices.IndexFunc(p.images, func(im Image) bool { return bytes.Equal(im.Data, l.Data) })
		switch {
		case !p.rt.canSee():
			why = append(why, "this model cannot see images")
		case !strings.HasPrefix(l.MIMEType, "image/"):
			why = append(why, fmt.Sprintf("%s is %s, not an image", l.Name, l.MIMEType))
		case len(l.Data) == 0 || len(l.Data) > MaxImageBytes:
			why = append(why, fmt.Sprintf("%s is %d bytes (an image is shown up to %d)", l.Name, len(l.Data), MaxImageBytes))
		case seen >= 0:
			// An image shown before (the same bytes) keeps its id: read
			// again, it does not count again.
			shown = append(shown, p.images[seen])
		case len(p.images) >= MaxImages:
			why = append(why, fmt.Sprintf("the run has shown %d images, the most it shows", MaxImages))
		default:
			img := Image{ID: fmt.Sprintf("image-%d", len(p.images)+1), Name: l.Name, MIMEType: l.MIMEType, Data: l.Data}
			p.images = append(p.images, img)
			shown = append(shown, img)
		}
	}
	if len(shown) > 0 {
		obj[ImagesKey] = mustJSON(shown)
	}
	if len(why) > 0 {
		obj["_imageError"] = mustJSON(fmt.Sprintf("%d attachment(s) came with this result and are not shown (%s); rely on the text.", len(why), strings.Join(distinct(why), "; ")))
	}
}

// distinct is s without repeats, in order.
func distinct(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
