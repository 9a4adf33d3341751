package abilities

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// result maps an MCP tool result to lloyal's shapes: isError → {error},
// structured content → its fields (or {result}), text → {text}, images and
// audio → _attachments, resources → {resources}. Images, audio and blobs in
// the structured content are lifted into _attachments too, each left as a
// reference (its type, MIME type and attachment name): base64 never reaches
// the model's context as text. A resource link says how to read it: link
// (nil: the links are not read) makes its URI readable and says how.
func result(r *mcp.CallToolResult, link func(uri string) string) map[string]any {
	var texts []string
	var resources []map[string]any
	var att attachments
	for i, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
		case *mcp.ImageContent:
			att.add(fmt.Sprintf("image-%d", i+1), c.MIMEType, c.Data)
		case *mcp.AudioContent:
			att.add(fmt.Sprintf("audio-%d", i+1), c.MIMEType, c.Data)
		case *mcp.ResourceLink:
			e := map[string]any{"uri": c.URI, "name": c.Name, "description": c.Description}
			if link != nil {
				e["read"] = link(c.URI)
			}
			resources = append(resources, e)
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			if len(c.Resource.Blob) > 0 {
				att.add(c.Resource.URI, c.Resource.MIMEType, c.Resource.Blob)
				continue
			}
			resources = append(resources, map[string]any{"uri": c.Resource.URI, "text": c.Resource.Text})
		}
	}
	if r.IsError {
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "the tool failed without saying why"
		}
		return map[string]any{"error": msg}
	}
	out := map[string]any{}
	if r.StructuredContent != nil {
		raw, _ := json.Marshal(r.StructuredContent)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // numbers as the server wrote them
		var v any
		if dec.Decode(&v) == nil {
			v = att.lift(v)
		}
		if obj, ok := v.(map[string]any); ok && obj != nil {
			out = obj
		} else {
			out["result"] = v
		}
	} else if len(texts) > 0 {
		out["text"] = strings.Join(texts, "\n")
	}
	if len(resources) > 0 {
		out["resources"] = resources
	}
	if len(att.list) > 0 {
		out["_attachments"] = att.list
	}
	return out
}

// attachments are a result's images, audio and blobs, each once.
type attachments struct {
	list   []map[string]any
	byData map[string]string // data → its attachment's name
}

// add attaches data (unless it already is) and returns its attachment's
// name.
func (a *attachments) add(name, mimeType string, data []byte) string {
	if n, ok := a.byData[string(data)]; ok {
		return n // the structured content repeats a content block
	}
	if a.byData == nil {
		a.byData = map[string]string{}
	}
	a.byData[string(data)] = name
	a.list = append(a.list, map[string]any{"name": name, "mimeType": mimeType, "data": data})
	return name
}

// lift replaces, in a structured result, each image or audio block
// ({"type":"image","data":…,"mimeType":…}) and each blob
// ({"blob":…,"uri":…}) with a reference to its attachment.
func (a *attachments) lift(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = a.lift(v[i])
		}
	case map[string]any:
		typ, _ := v["type"].(string)
		mimeType, _ := v["mimeType"].(string)
		if data, ok := v["data"].(string); ok && (typ == "image" || typ == "audio") {
			name := a.add(fmt.Sprintf("structured-%s-%d", typ, len(a.list)+1), mimeType, decode64(data))
			return map[string]any{"type": typ, "mimeType": mimeType, "attachment": name}
		}
		if blob, ok := v["blob"].(string); ok {
			uri, _ := v["uri"].(string)
			name := uri
			if name == "" {
				name = fmt.Sprintf("structured-blob-%d", len(a.list)+1)
			}
			name = a.add(name, mimeType, decode64(blob))
			delete(v, "blob")
			v["attachment"] = name
			return v
		}
		for k, x := range v {
			v[k] = a.lift(x)
		}
	}
	return v
}

// decode64 is base64 data as bytes (the text itself when it is not base64:
// it is attached, not read, either way).
func decode64(s string) []byte {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(s)
}
