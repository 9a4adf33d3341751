package app

import (
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
)

// Theme is the named theme (dark, light, high-contrast), with colour
// turned off for the whole program when NO_COLOR is set.
func Theme(name string) (themes.Theme, error) {
	if themes.NoColor() {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	return themes.ByName(name)
}

// Replay plays the trace at path in the app at speed (0: straight to the
// end), following it as it grows when follow is set, until the person
// quits.
func Replay(path string, t themes.Theme, speed float64, follow bool) error {
	ix, err := trace.BuildIndex(path)
	if err != nil {
		return err
	}
	title := "replay " + path
	if ix.Header != nil && ix.Header.Model.Name != "" {
		title = "replay · " + ix.Header.Model.Name
	}
	p := ui.NewPlayer(ix, speed)
	if follow {
		p.Follow()
	}
	o := ui.Options{Theme: t, Title: title, Dev: os.Getenv("LLOYAL_DEV") == "1", Replay: p}
	if ix.Header != nil {
		o.Sources = ix.Header.AbilitySources()
	}
	_, err = tea.NewProgram(ui.New(o), tea.WithAltScreen()).Run()
	return err
}
