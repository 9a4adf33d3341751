// Package themes holds the terminal app's colour themes: dark, light and
// high contrast, and plain (no colour) when NO_COLOR is set.
package themes

import (
	"fmt"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Theme is the set of styles the UI draws with.
type Theme struct {
	Name     string
	Title    lipgloss.Style
	Dim      lipgloss.Style
	Border   lipgloss.Style // pane borders
	Focus    lipgloss.Style // the focused pane's border
	Selected lipgloss.Style
	Good     lipgloss.Style // green: returned, gauge < 70 %
	Warn     lipgloss.Style // yellow: gauge ≥ 70 %, nudges, retries
	Bad      lipgloss.Style // red: failures, gauge ≥ 90 %
	Accent   lipgloss.Style // tool names, approvals
	Key      lipgloss.Style // key hints
}

func build(name string, fg, dim, border, focus, sel, good, warn, bad, accent lipgloss.TerminalColor) Theme {
	s := lipgloss.NewStyle
	return Theme{
		Name:   name,
		Title:  s().Bold(true).Foreground(fg),
		Dim:    s().Foreground(dim),
		Border: s().BorderStyle(lipgloss.RoundedBorder()).BorderForeground(border),
		// The focused pane's border is thick as well as coloured, so it is
		// marked under NO_COLOR too.
		Focus:    s().BorderStyle(lipgloss.ThickBorder()).BorderForeground(focus),
		Selected: s().Bold(true).Reverse(true),
		Good:     s().Foreground(good),
		Warn:     s().Foreground(warn),
		Bad:      s().Foreground(bad),
		Accent:   s().Foreground(accent).Bold(true),
		Key:      s().Foreground(accent),
	}
}

// Dark is the default theme.
func Dark() Theme {
	return build("dark", lipgloss.Color("252"), lipgloss.Color("244"), lipgloss.Color("240"), lipgloss.Color("39"),
		nil, lipgloss.Color("42"), lipgloss.Color("214"), lipgloss.Color("196"), lipgloss.Color("75"))
}

// Light suits light terminal backgrounds.
func Light() Theme {
	return build("light", lipgloss.Color("235"), lipgloss.Color("243"), lipgloss.Color("250"), lipgloss.Color("25"),
		nil, lipgloss.Color("28"), lipgloss.Color("130"), lipgloss.Color("160"), lipgloss.Color("25"))
}

// HighContrast uses the 16 base colours, bold.
func HighContrast() Theme {
	t := build("high-contrast", lipgloss.Color("15"), lipgloss.Color("15"), lipgloss.Color("15"), lipgloss.Color("11"),
		nil, lipgloss.Color("10"), lipgloss.Color("11"), lipgloss.Color("9"), lipgloss.Color("14"))
	t.Good, t.Warn, t.Bad = t.Good.Bold(true), t.Warn.Bold(true), t.Bad.Bold(true)
	return t
}

// ByName returns a theme: dark, light or high-contrast.
func ByName(name string) (Theme, error) {
	switch strings.ToLower(name) {
	case "", "dark":
		return Dark(), nil
	case "light":
		return Light(), nil
	case "high-contrast", "hc", "contrast":
		return HighContrast(), nil
	}
	return Theme{}, fmt.Errorf("theme %q: use dark, light or high-contrast", name)
}

// NoColor reports whether the user asked for no colour (https://no-color.org).
func NoColor() bool { return os.Getenv("NO_COLOR") != "" }
