package ui

import "github.com/charmbracelet/bubbles/key"

// globalKeys are the keys routing step 3 answers, whatever has the focus.
type globalKeys struct {
	Focus, Dev, Inspect, Filter, Freeze, Pause, Finish, Cancel, Fork, Help, Quit, Interrupt key.Binding
}

func defaultKeys() globalKeys {
	b := func(keys []string, k, h string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, h))
	}
	return globalKeys{
		Focus:     b([]string{"tab"}, "tab", "focus"),
		Dev:       b([]string{"d"}, "d", "dev pane"),
		Inspect:   b([]string{"i"}, "i", "inspect events (JSON)"),
		Filter:    b([]string{"/"}, "/", "filter"),
		Freeze:    b([]string{"z"}, "z", "freeze dev pane"),
		Pause:     b([]string{"p"}, "p", "pause/resume"),
		Finish:    b([]string{"f"}, "f", "finish up"),
		Cancel:    b([]string{"x"}, "x", "cancel agent"),
		Fork:      b([]string{"F"}, "F", "fork here"),
		Help:      b([]string{"?"}, "?", "help"),
		Quit:      b([]string{"q"}, "q", "quit"),
		Interrupt: b([]string{"ctrl+c"}, "ctrl+c", "finish up, twice: quit"),
	}
}

// keyHelp is what the key line and the ? screen show: bubbles/help reads it.
type keyHelp struct {
	short []key.Binding
	full  [][]key.Binding
}

func (k keyHelp) ShortHelp() []key.Binding  { return k.short }
func (k keyHelp) FullHelp() [][]key.Binding { return k.full }
