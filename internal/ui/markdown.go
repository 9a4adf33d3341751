package ui

import (
	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

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
	md = sanitize(md)
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
	// glamour decodes character references ("&#27;", "&#x202e;") after
	// the source was sanitized: its output keeps its own colours alone.
	return termtext.EscapeKeepingSGR(out)
}
