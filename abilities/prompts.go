package abilities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prompt is a prompt an ability's server offers (MCP prompts/list): a task
// written by the server's author, which a harness step may take as its
// task (Server.Prompt gets its text).
type Prompt struct {
	// Name is what Server.Prompt takes.
	Name string
	// Title and Description are the server's words for people: Title at
	// most 200 bytes, Description at most 1 KiB, each on one line and
	// neutralised (Neutralise).
	Title       string
	Description string
	// Arguments are what the prompt takes, in the server's order.
	Arguments []PromptArgument
}

// PromptArgument is an argument a prompt takes.
type PromptArgument struct {
	Name string
	// Description is the server's, as Prompt's is.
	Description string
	// Required: the server refuses the prompt without it.
	Required bool
}

// What a server's prompts may bring.
const (
	// maxPrompts is how many prompts Prompts lists, from at most
	// maxPromptPages pages of prompts/list; maxPromptArgs how many
	// arguments of each.
	maxPrompts     = 100
	maxPromptPages = 20
	maxPromptArgs  = 32
	// maxPromptTitle and maxPromptDescription bound a prompt's title and
	// description (an argument's too).
	maxPromptTitle       = 200
	maxPromptDescription = 1 << 10
	// maxPromptText bounds the text Prompt returns.
	maxPromptText = 16 << 10
)

// Prompts starts the server if need be and lists the prompts it offers:
// none (and no error) when it does not declare the prompts capability. At
// most 100 are listed, from at most 20 pages; a prompt whose name is not 1
// to 64 letters, digits, '_', '.' or '-' is left out, as a tool's would be
// (a harness file names it, a trace records it).
func (s *Server) Prompts(ctx context.Context) ([]Prompt, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, fmt.Errorf("ability %s: %w", s.ab.Name, err)
	}
	if init := c.sess.InitializeResult(); init == nil || init.Capabilities == nil || init.Capabilities.Prompts == nil {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var out []Prompt
	_, err = pages(maxPromptPages, func(cursor string) ([]*mcp.Prompt, string, error) {
		res, err := c.sess.ListPrompts(cctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	}, func(p *mcp.Prompt) bool {
		if p != nil && toolName.MatchString(p.Name) {
			out = append(out, prompt(p))
		}
		return len(out) < maxPrompts
	})
	if err != nil {
		return nil, s.requestFailed(ctx, cctx, c, "list its prompts", err)
	}
	return out, nil
}

// prompt is what Prompts gives of a listed prompt.
func prompt(p *mcp.Prompt) Prompt {
	out := Prompt{Name: p.Name, Title: prose(p.Title, maxPromptTitle), Description: prose(p.Description, maxPromptDescription)}
	for _, a := range p.Arguments {
		if len(out.Arguments) == maxPromptArgs {
			break
		}
		if a == nil {
			continue
		}
		out.Arguments = append(out.Arguments, PromptArgument{Name: cut(oneLine(a.Name), maxPromptTitle), Description: prose(a.Description, maxPromptDescription), Required: a.Required})
	}
	return out
}

// prose is a server's words for a person: on one line, at most n bytes,
// neutralised.
func prose(s string, n int) string {
	return cut(Neutralise(oneLine(cut(s, 2*n))), n)
}

// Prompt gets the named prompt with args (prompts/get) and returns its
// messages' text, in order, joined by blank lines (roles are not kept: a
// task is one text): an embedded text resource gives its text; an image,
// audio, a blob or a link is named, never written out. The text is at most
// 16 KiB (cut, saying so with "…") and neutralised as an ability's
// instructions are (Neutralise): it is the server's words, which a harness
// step may give an agent as its task. An error says what failed: the
// server declares no prompts, refused (an unknown prompt, a missing
// argument: the server's message), or failed (it is started again on the
// next use).
func (s *Server) Prompt(ctx context.Context, name string, args map[string]string) (string, error) {
	c, err := s.session(ctx)
	if err != nil {
		return "", fmt.Errorf("ability %s: %w", s.ab.Name, err)
	}
	if init := c.sess.InitializeResult(); init == nil || init.Capabilities == nil || init.Capabilities.Prompts == nil {
		return "", fmt.Errorf("ability %s: prompt %q: its server offers no prompts", s.ab.Name, name)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := c.sess.GetPrompt(cctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return "", s.requestFailed(ctx, cctx, c, fmt.Sprintf("prompt %q", name), err)
	}
	return promptText(res), nil
}

// promptText is the text of a prompt's messages (Prompt).
func promptText(r *mcp.GetPromptResult) string {
	var parts []string
	size := 0
	for _, m := range r.Messages {
		if m == nil || size > 2*maxPromptText {
			continue // what is past the bound is cut anyway
		}
		var text string
		switch c := m.Content.(type) {
		case *mcp.TextContent:
			text = c.Text
		case *mcp.EmbeddedResource:
			switch {
			case c.Resource == nil:
			case c.Resource.Blob != nil:
				text = fmt.Sprintf("[resource %s: %s, %d bytes, not shown]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))
			default:
				text = c.Resource.Text
			}
		case *mcp.ImageContent:
			text = fmt.Sprintf("[image: %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			text = fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			text = fmt.Sprintf("[resource %s: %s]", c.Name, c.URI)
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		text = cut(text, 2*maxPromptText)
		size += len(text)
		parts = append(parts, text)
	}
	// Cut before and after neutralising: a marker neutralised is longer.
	return cut(Neutralise(cut(strings.Join(parts, "\n\n"), 2*maxPromptText)), maxPromptText)
}

// requestFailed is the error of a request (what) the server did not
// answer: a refusal (a JSON-RPC error) leaves the server running; a hang or
// a crash ends it, and it is started again on its next use.
func (s *Server) requestFailed(ctx, cctx context.Context, c *conn, what string, err error) error {
	var wire *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &wire) && wire.Code != codeRejected:
		return fmt.Errorf("ability %s: %s: the server refused: %w", s.ab.Name, what, wire)
	case cctx.Err() != nil:
		reason := fmt.Sprintf("the server did not answer within %s", s.timeout)
		s.fail(c, reason)
		return fmt.Errorf("ability %s: %s: %s", s.ab.Name, what, reason)
	default:
		reason := c.why(err)
		s.fail(c, reason)
		return fmt.Errorf("ability %s: %s: %s", s.ab.Name, what, reason)
	}
}
