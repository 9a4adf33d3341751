package cli

import (
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
)

func theme(name string) (themes.Theme, error) {
	if themes.NoColor() {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	return themes.ByName(name)
}

func newReplayTUI(path, themeName string, speed float64, follow bool) error {
	t, err := theme(themeName)
	if err != nil {
		return err
	}
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
	m := ui.New(o)
	_, err = tea.NewProgram(m, tea.WithAltScreen()).Run()
	return err
}
