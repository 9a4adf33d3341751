package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Images a tool returns (its result's _attachments, an MCP server's image
// content) reach a model that can see: each is kept by the pool under an
// id, the result the model reads names it ("_images"), and the backend
// shows the image itself beside the result (a server: an image part of the
// chat request). Where the model cannot see, the result says so instead
// ("_imageError").

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
		switch {
		case !p.rt.canSee():
			why = append(why, "this model cannot see images")
		case !strings.HasPrefix(l.MIMEType, "image/"):
			why = append(why, fmt.Sprintf("%s is %s, not an image", l.Name, l.MIMEType))
		case len(l.Data) == 0 || len(l.Data) > MaxImageBytes:
			why = append(why, fmt.Sprintf("%s is %d bytes (an image is shown up to %d)", l.Name, len(l.Data), MaxImageBytes))
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
