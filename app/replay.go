package app

import (
	"fmt"
	"os"
	"path/filepath"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/internal/ui"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
)

// Theme is the named theme (dark, light, high-contrast), with colour
// turned off for the whole program when NO_COLOR is set.
func Theme(name string) (themes.Theme, error) {
	if themes.NoColor() {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	return themes.ByName(name)
}

// ForkRequest is a fork asked for from a replay (F): the event to fork at
// and what the agent reads there instead.
type ForkRequest = ui.ForkRequest

// Replay plays the trace at path in the app at speed (0: straight to the
// end), following it as it grows when follow is set, until the person
// quits, or asks with F for a fork: then it returns the fork to run.
// forkRefused, when not nil, says from the trace's header why F cannot
// fork ("" when it can; said when F is pressed).
func Replay(path string, t themes.Theme, speed float64, follow bool, forkRefused func(*trace.Header) string) (*ForkRequest, error) {
	ix, err := trace.BuildIndex(path)
	if err != nil {
		return nil, err
	}
	title := "replay " + path
	if ix.Header != nil && ix.Header.Model.Name != "" {
		title = "replay · " + ix.Header.Model.Name
	}
	title += Lineage(ix.Header)
	p := ui.NewPlayer(ix, speed)
	if follow {
		p.Follow()
	}
	o := ui.Options{Theme: t, Title: title, Dev: os.Getenv("LLOYAL_DEV") == "1", Replay: p}
	if forkRefused != nil && ix.Header != nil {
		o.ForkRefused = forkRefused(ix.Header)
	}
	if ix.Header != nil {
		o.Sources = ix.Header.AbilitySources()
	}
	final, err := tea.NewProgram(ui.New(o), tea.WithAltScreen()).Run()
	if m, ok := final.(*ui.Model); ok && err == nil {
		return m.Fork(), nil
	}
	return nil, err
}

// Lineage says where a run came from, for a title: " · fork of TRACE at
// event N", " · rerun of TRACE", or "".
func Lineage(h *trace.Header) string {
	switch {
	case h == nil:
	case h.ForkOf != nil:
		return fmt.Sprintf(" · fork of %s at event %d", filepath.Base(h.ForkOf.Trace), h.ForkOf.Event)
	case h.RerunOf != "":
		return " · rerun of " + filepath.Base(h.RerunOf)
	}
	return ""
}
