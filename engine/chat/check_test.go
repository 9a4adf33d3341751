package chat

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckRolesFromTheRender: the check's roles are the turns the
// template renders, not the role names its text quotes — a template that
// spells its roles through a mapping (roleMapTemplates, rolemap.jinja:
// dict(tool=…), roles[message.role], a name as given) has its tool turn
// named, and lloyal serves its tool results as that turn. Gemma's test
// template shows the system prompt in the first user turn but has no
// tool role, and the check says so.
func TestCheckRolesFromTheRender(t *testing.T) {
	srcs := maps.Clone(roleMapTemplates)
	for _, name := range []string{"rolemap", "gemma", "hermes"} {
		srcs[name] = string(mustRead(t, filepath.Join("testdata", "templates", name+".jinja")))
	}
	want := map[string]struct{ roles, tools string }{
		"gemma":   {"the template shows system, user, assistant messages;", "has no tool role"},
		"hermes":  {"the template shows system, user, assistant, tool messages;", "is the template's render"},
		"rolemap": {"the template shows system, user, assistant, tool messages;", "is the template's render"},
	}
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok { // a role map of differential_test.go
				w = want["rolemap"]
			}
			tm, err := NewTemplate(srcs[name], "", "")
			if err != nil {
				t.Fatal(err)
			}
			lines := map[string]CheckLine{}
			for _, l := range CheckTemplate(tm) {
				lines[l.Aspect] = l
			}
			if l := lines["roles"]; !l.OK || !strings.HasPrefix(l.Text, w.roles) {
				t.Errorf("roles: %s\nwant it to start %q", l, w.roles)
			}
			if l := lines["tools"]; !l.OK || !strings.Contains(l.Text, w.tools) {
				t.Errorf("tools: %s\nwant it to say %q", l, w.tools)
			}
		})
	}
}
