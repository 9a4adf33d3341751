package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine"
)

// MaxAttachmentText is how much of a text attachment one call shows: about
// two thousand tokens, the most a read_file call shows.
const MaxAttachmentText = 8 << 10

// AttachmentTool shows the model a file the run was given (lloyal run
// --attach, a harness file's attachments:) or a tool delivered: an image
// goes back as the result's attachment, which the runtime shows a model
// that can see and explains to one that cannot; a text file's text, up to
// MaxAttachmentText bytes from offset; any other file only its name, type
// and size. given, the files given to the run, are the argument's choices
// (their names, and offsets inside the longest text): with files given, a
// file a tool delivered later is not among them.
func AttachmentTool(given []engine.Attachment) engine.Tool {
	name := map[string]any{"type": "string", "description": "the attachment's name"}
	var names []string
	longest := 0
	for _, a := range given {
		names = append(names, a.Name)
		if isText(a) {
			longest = max(longest, len(a.Data))
		}
	}
	if len(names) > 0 {
		name["enum"] = names
	}
	props := map[string]any{"name": name}
	if longest > MaxAttachmentText || len(given) == 0 {
		offset := map[string]any{"type": "integer", "minimum": 0, "description": "for a text file: the byte to start at (default 0)"}
		if longest > 0 {
			offset["maximum"] = longest - 1
		}
		props["offset"] = offset
	}
	params := map[string]any{"type": "object", "required": []string{"name"}, "properties": props}
	desc := "Show a file the user attached to the run: an image is shown to you, a text file's text is returned."
	if len(names) > 0 {
		desc += " Attached: " + strings.Join(names, ", ") + "."
	}
	spec := engine.ToolSpec{Name: "read_attachment", Description: desc, Parameters: mustJSON(params)}
	return engine.Typed(spec, func(ctx context.Context, a struct {
		Name   string `json:"name"`
		Offset int    `json:"offset"`
	}) (any, error) {
		all := engine.Attachments(ctx)
		var have []string
		for i := len(all) - 1; i >= 0; i-- { // the latest of a name
			if all[i].Name == a.Name {
				return showAttachment(all[i], a.Offset), nil
			}
		}
		for _, at := range all {
			have = append(have, at.Name)
		}
		if len(have) == 0 {
			return engine.ErrorResult("no file is attached to this run: answer without one"), nil
		}
		return engine.ErrorResult("no attachment is named %q: the attachments are %s", a.Name, strings.Join(have, ", ")), nil
	})
}

// showAttachment is what a call shows of at.
func showAttachment(at engine.Attachment, offset int) map[string]any {
	out := map[string]any{"name": at.Name, "mimeType": at.MIMEType, "bytes": len(at.Data)}
	switch {
	case strings.HasPrefix(at.MIMEType, "image/"):
		out["_attachments"] = []map[string]any{{"name": at.Name, "mimeType": at.MIMEType, "data": at.Data}}
	case isText(at):
		if offset >= len(at.Data) && offset > 0 {
			return engine.ErrorResult("offset %d is past the end of %s (%d bytes): call again with a smaller offset, or 0 for its start", offset, at.Name, len(at.Data))
		}
		offset = max(offset, 0)
		for offset > 0 && offset < len(at.Data) && !utf8.RuneStart(at.Data[offset]) {
			offset--
		}
		end := min(offset+MaxAttachmentText, len(at.Data))
		for end < len(at.Data) && end > offset && !utf8.RuneStart(at.Data[end]) {
			end--
		}
		out["text"] = string(at.Data[offset:end])
		if offset > 0 || end < len(at.Data) {
			out["shown"] = fmt.Sprintf("bytes %d to %d of %d", offset, end, len(at.Data))
		}
		if end < len(at.Data) {
			out["next"] = fmt.Sprintf("call again with offset %d for the rest", end)
		}
	default:
		out["note"] = "not text or an image: its content is not shown"
	}
	return out
}

// isText says whether an attachment is shown as text: any file of UTF-8
// that is not an image.
func isText(a engine.Attachment) bool {
	return !strings.HasPrefix(a.MIMEType, "image/") && utf8.Valid(a.Data)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
