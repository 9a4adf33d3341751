package ui

import "github.com/charmbracelet/bubbles/key"

type keyMap struct {
	Up, Down, Focus, Dev, Filter, DevPause, ScrollUp, ScrollDown key.Binding
	Pause, Finish, Cancel, Help, Quit, Interrupt                 key.Binding
	AllowOnce, AllowSession, AllowAlways, Deny, DenyReason       key.Binding
}

func defaultKeys() keyMap {
	b := func(keys []string, k, h string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, h))
	}
	return keyMap{
		Up:           b([]string{"up", "k"}, "↑/k", "agent"),
		Down:         b([]string{"down", "j"}, "↓/j", "agent"),
		Focus:        b([]string{"tab"}, "tab", "focus"),
		Dev:          b([]string{"d"}, "d", "dev pane"),
		Filter:       b([]string{"/"}, "/", "filter"),
		DevPause:     b([]string{"z"}, "z", "freeze dev pane"),
		ScrollUp:     b([]string{"pgup", "K"}, "pgup", "scroll up"),
		ScrollDown:   b([]string{"pgdown", "J"}, "pgdn", "scroll down"),
		Pause:        b([]string{"p"}, "p", "pause/resume"),
		Finish:       b([]string{"f"}, "f", "finish up"),
		Cancel:       b([]string{"x"}, "x", "cancel agent"),
		Help:         b([]string{"?"}, "?", "help"),
		Quit:         b([]string{"q"}, "q", "quit"),
		Interrupt:    b([]string{"ctrl+c"}, "ctrl+c", "finish up, twice: quit"),
		AllowOnce:    b([]string{"y"}, "y", "allow once"),
		AllowSession: b([]string{"s"}, "s", "allow for this session"),
		AllowAlways:  b([]string{"a"}, "a", "always"),
		Deny:         b([]string{"n"}, "n", "deny"),
		DenyReason:   b([]string{"r"}, "r", "deny with a reason"),
	}
}

// ShortHelp is the key line.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Up, k.Dev, k.Filter, k.Pause, k.Finish, k.Cancel, k.Help, k.Quit}
}

// FullHelp is the ? screen.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Focus, k.ScrollUp, k.ScrollDown},
		{k.Dev, k.Filter, k.DevPause},
		{k.Pause, k.Finish, k.Cancel, k.Interrupt, k.Quit},
		{k.AllowOnce, k.AllowSession, k.AllowAlways, k.Deny, k.DenyReason},
	}
}
