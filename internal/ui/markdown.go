package ui

import (
	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/internal/termtext"
	"github.com/lloyal-ai/lloyal/themes"
)

// markdownStyle is glamour's standard style for a theme: plain text
// (notty) without colour, so NO_COLOR and the goldens have no escapes.
func markdownStyle(t themes.Theme) string {
	switch {
	case themes.NoColor() || t.Name == "":
		return "notty"
	case t.Name == "light":
		return "light"
	}
	return "dark"
}

// renderMarkdown renders a report's Markdown with glamour. It runs in a
// Cmd (never on the UI goroutine) with a renderer of its own: renderers are
// not shared across goroutines.
func renderMarkdown(md string, width int, style string) string {
	// The source is sanitized first (escapes made visible); glamour's own
	// styling escapes are then the only ones in the output. Its colour
	// profile follows lipgloss's, so NO_COLOR and tests get plain text.
	md = sanitize(controlRefs.ReplaceAllStringFunc(md, defuseRef))
	if lipgloss.ColorProfile() == termenv.Ascii {
		style = "notty"
	}
	r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithWordWrap(max(width, 20)),
		glamour.WithColorProfile(lipgloss.ColorProfile()))
	if err != nil {
		return md
	}
	out, err := r.Render(md)
	if err != nil {
		return md
	}
	// A second guard: whatever glamour decodes after the source was
	// sanitized, its output keeps its own colours alone.
	return termtext.EscapeKeepingSGR(out)
}

// controlRefs are numeric character references, which glamour decodes.
// The semicolon is optional: glamour's decoding (html.UnescapeString)
// takes "&#27" too.
var controlRefs = regexp.MustCompile(`&#([xX][0-9a-fA-F]{1,8}|[0-9]{1,10});?`)

// defuseRef writes a reference to a control character (&#27;, &#x9b;) so
// that it renders as the text it is: decoded, its colour codes would pass
// as glamour's own (concealed text, black on black).
func defuseRef(ref string) string {
	num := strings.TrimSuffix(ref[2:], ";")
	base := 10
	if num[0] == 'x' || num[0] == 'X' {
		num, base = num[1:], 16
	}
	n, err := strconv.ParseInt(num, base, 32)
	if err == nil && termtext.Escape(string(rune(n))) == string(rune(n)) && rune(n) != utf8.RuneError {
		return ref
	}
	return "&amp;" + ref[1:]
}
