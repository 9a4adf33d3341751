package abilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine"
)

// readResource is the name, after the ability's prefix, of the tool lloyal
// adds for a server that offers resources (MCP resources): NAME_read_resource.
const readResource = "read_resource"

// What a server's resources may put into the prompt and into a result.
const (
	// maxResources is how many listed resources the read tool offers, and
	// maxResourcePages how many pages of resources/list are read for them
	// (a server that pages on with nothing in its pages is not followed
	// further).
	maxResources     = 200
	maxResourcePages = 20
	// maxResourceBytes bounds the listed resources' URIs, names and
	// descriptions together; maxURI one URI (a longer one is not offered,
	// nor a link to it kept).
	maxResourceBytes = 64 << 10
	maxURI           = 2 << 10
	// maxEnum: up to this many listed URIs, of maxEnumBytes at most in
	// all, are an enum in the read tool's schema; more are a plain string.
	maxEnum      = 50
	maxEnumBytes = 4 << 10
	// maxReadDescription bounds the read tool's description, which lists
	// the resources, each in at most maxResourceLine bytes.
	maxReadDescription = 8 << 10
	maxResourceLine    = 300
	// maxRead bounds the text a read returns, in all; maxReadContents the
	// contents it returns.
	maxRead         = 64 << 10
	maxReadContents = 32
	// maxLinks bounds the URIs that links in results make readable in a
	// server's life.
	maxLinks = 256
)

// resourceSet is what the read tool may read: the URIs the server listed
// and those the results of its tools linked to. The model reads only what
// the server offered, never a URI it made up.
type resourceSet struct {
	mu     sync.Mutex
	reader string // the read tool's name; "" when there is none
	listed map[string]bool
	linked map[string]bool
}

// offer records the read tool's name ("" when none is offered) and the URIs
// the server listed.
func (r *resourceSet) offer(reader string, listed []*mcp.Resource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reader, r.listed = reader, map[string]bool{}
	for _, res := range listed {
		r.listed[res.URI] = true
	}
}

// readable says whether the read tool may read uri.
func (r *resourceSet) readable(uri string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listed[uri] || r.linked[uri]
}

// link makes a URI a result linked to readable (within maxLinks) and says,
// for the model, how to read it or why it cannot be.
func (r *resourceSet) link(ability, uri string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.reader == "":
		return fmt.Sprintf("cannot be read: ability %s offers no tool that reads its server's resources", ability)
	case uri == "" || len(uri) > maxURI:
		return fmt.Sprintf("cannot be read: its URI is empty or over %d bytes", maxURI)
	case r.listed[uri] || r.linked[uri]:
	case len(r.linked) >= maxLinks:
		return fmt.Sprintf("cannot be read: the results of ability %s linked to over %d resources in this run", ability, maxLinks)
	default:
		if r.linked == nil {
			r.linked = map[string]bool{}
		}
		r.linked[uri] = true
	}
	return fmt.Sprintf("read it with %s (its uri)", r.reader)
}

// offersResources: the server declared the resources capability.
func offersResources(c *conn) bool {
	init := c.sess.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil
}

// listResources lists the server's resources, within maxResources,
// maxResourcePages and maxResourceBytes, leaving out those with no URI or
// one over maxURI, and those whose URI holds a line break or what a model
// may read as markup (roleMarker): a URI goes word for word into the read
// tool's schema, which is in the prompt. left says, for a warning, what it
// left out or did not read ("" for nothing).
func listResources(ctx context.Context, c *conn) (list []*mcp.Resource, left string, err error) {
	size, skipped, full := 0, 0, false
	more, err := pages(maxResourcePages, func(cursor string) ([]*mcp.Resource, string, error) {
		res, err := c.sess.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Resources, res.NextCursor, nil
	}, func(r *mcp.Resource) bool {
		if r == nil || r.URI == "" || len(r.URI) > maxURI || strings.ContainsFunc(r.URI, breaksLine) || roleMarker.MatchString(r.URI) {
			skipped++
			return true
		}
		size += len(r.URI) + len(r.Name) + len(r.Title) + len(r.Description)
		if full = len(list) == maxResources || size > maxResourceBytes; !full {
			list = append(list, r)
		}
		return !full
	})
	switch {
	case err != nil:
		return nil, "", err
	case full:
		return list, fmt.Sprintf("its server lists more than %d resources (or over %d KiB of them): the first %d are offered", maxResources, maxResourceBytes>>10, len(list)), nil
	case more:
		return list, fmt.Sprintf("its server lists more than %d pages of resources: those of the first %d are offered", maxResourcePages, maxResourcePages), nil
	}
	if skipped > 0 {
		left = fmt.Sprintf("its server lists %d resource(s) with no URI, one over %d bytes, or one holding a line break or markup: left out", skipped, maxURI)
	}
	return list, left, nil
}

// resourceTool is the read tool for the resources listed: its parameter is
// the URI, an enum of the listed ones where they are few; its description
// lists them (name, URI, description), within maxReadDescription.
func (s *Server) resourceTool(name string, listed []*mcp.Resource) *Tool {
	var b strings.Builder
	fmt.Fprintf(&b, "Read a resource of ability %s's server by its URI (it only reads). It reads the resources listed below, and those a result of %s's tools links to.", s.ab.Name, s.ab.Name)
	if len(listed) == 0 {
		b.WriteString(" The server lists no resources: read those a result links to.")
	} else {
		b.WriteString("\nResources:")
	}
	for i, r := range listed {
		label := r.Name
		if label == "" {
			label = r.Title
		}
		line := "\n- " + oneLine(label) + " (" + oneLine(r.URI) + ")"
		if d := oneLine(r.Description); d != "" {
			line += ": " + d
		}
		line = Neutralise(cut(line, maxResourceLine))
		if b.Len()+len(line) > maxReadDescription-64 {
			fmt.Fprintf(&b, "\n- and %d more, not listed here", len(listed)-i)
			break
		}
		b.WriteString(line)
	}
	uri := map[string]any{"type": "string", "description": "the resource's URI, exactly as listed or as the result linked to it"}
	enumBytes := 0
	for _, r := range listed {
		enumBytes += len(r.URI)
	}
	// The enum goes into every agent's prompt with the tool: only while it
	// is short (maxEnumBytes).
	if len(listed) > 0 && len(listed) <= maxEnum && enumBytes <= maxEnumBytes {
		// A call's arguments are written under a grammar made from this
		// schema: an enum alone would let the model write no URI but the
		// listed ones, never one a result linked to (which the server did
		// not list: server-everything's dynamic resources). The enum is
		// the first choice, any string the second.
		uris := make([]string, len(listed))
		for i, r := range listed {
			uris[i] = r.URI
		}
		uri = map[string]any{"description": "the resource's URI: one of those listed, or one a result linked to",
			"anyOf": []any{map[string]any{"type": "string", "enum": uris}, map[string]any{"type": "string"}}}
	}
	params, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"uri": uri}, "required": []string{"uri"}, "additionalProperties": false})
	return &Tool{srv: s, reads: true, spec: engine.ToolSpec{
		Name:        name,
		Description: b.String(),
		Parameters:  params,
		// It only reads, unless the manifest protects it.
		Protected: s.ab.Manifest.protects(readResource),
		Fanout:    true,
	}}
}

// oneLine is s on one line: a server's name or description may hold line
// breaks, which would break the list it goes in.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || breaksLine(r) }), " ")
}

// read reads a resource the server offered (resources/read). A URI it did
// not list, nor a result link to, is refused before the server sees it.
func (t *Tool) read(ctx context.Context, args json.RawMessage) (any, error) {
	s := t.srv
	if msg, err := engine.ValidateArgs(t.spec, args); err != nil || msg != "" {
		if err != nil {
			return nil, err
		}
		return engine.ErrorResult("%s", msg), nil
	}
	var in struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, fmt.Errorf("%s: read its arguments: %w", t.spec.Name, err)
	}
	if !s.res.readable(in.URI) {
		return engine.ErrorResult("%s cannot read %q: the server did not offer it. Read a URI its description lists, or one a result of ability %s's tools linked to, exactly as given.", t.spec.Name, cut(in.URI, 200), s.ab.Name), nil
	}
	defer s.traceLines(ctx)
	c, err := s.session(ctx)
	if err != nil {
		return t.unavailable(ctx, err), nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := c.sess.ReadResource(cctx, &mcp.ReadResourceParams{URI: in.URI})
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		return readResult(in.URI, res), nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &wire) && wire.Code != codeRejected:
		s.failedNote(ctx, "error", "the server refused to read "+cut(in.URI, 200)+": "+cut(wire.Message, maxNotedBytes), nil)
		return engine.ErrorResult("%s could not read %q: the server says: %s", t.spec.Name, cut(in.URI, 200), cut(wire.Message, maxNotedBytes)), nil
	case cctx.Err() != nil:
		return t.lost(ctx, c, err, fmt.Sprintf("the server did not answer within %s", s.timeout)), nil
	default:
		return t.lost(ctx, c, err, ""), nil
	}
}

// readResult is what the model reads of a resource: its text, at most
// maxRead bytes in all, and each blob described (its MIME type and size),
// never written out. A content's URI is given where it is not the one read.
func readResult(uri string, r *mcp.ReadResourceResult) map[string]any {
	out := map[string]any{"uri": uri}
	var contents []map[string]any
	left := maxRead
	for i, c := range r.Contents {
		if i == maxReadContents {
			out["more"] = fmt.Sprintf("%d more contents not shown", len(r.Contents)-i)
			break
		}
		if c == nil {
			continue
		}
		e := map[string]any{}
		if c.URI != uri {
			e["uri"] = c.URI
		}
		if c.MIMEType != "" {
			e["mimeType"] = c.MIMEType
		}
		if c.Blob != nil {
			mimeType := c.MIMEType
			if mimeType == "" {
				mimeType = "binary data"
			}
			e["blob"] = fmt.Sprintf("%s, %d bytes (not shown)", mimeType, len(c.Blob))
		} else {
			text := c.Text
			if len(text) > left {
				e["cut"] = fmt.Sprintf("only the first %d of its %d bytes are shown", max(left, 0), len(text))
				text = cut(text, max(left, 0))
			}
			left -= len(text)
			e["text"] = text
		}
		contents = append(contents, e)
	}
	if len(contents) == 0 {
		out["text"] = ""
		out["note"] = "the server returned no contents"
		return out
	}
	out["contents"] = contents
	return out
}
