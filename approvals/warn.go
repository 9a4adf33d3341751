package approvals

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

// UnmatchedGrants are the values of --grant that name none of tools: a
// grant names a tool exactly (no patterns), and one that names nothing of
// the run lets nothing run, which the user should hear rather than find
// out when a call asks.
func UnmatchedGrants(grants []string, tools []engine.ToolSpec) []string {
	var out []string
	for _, g := range grants {
		if !slices.ContainsFunc(tools, func(s engine.ToolSpec) bool { return s.Name == g }) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// Warn tells w, before a run of tools starts, what its grants do not do as
// the user may think: each --grant that names none of the run's tools
// (naming its protected ones), and each name-only grant an older lloyal
// saved for a protected tool of the run: it still lets a built-in tool
// run, never a harness's or an ability's tool of the same name. A nil w
// is os.Stderr.
func (f *Config) Warn(w io.Writer, tools []engine.Tool) {
	if w == nil {
		w = os.Stderr
	}
	specs := make([]engine.ToolSpec, 0, len(tools))
	var protected []string
	for _, t := range tools {
		s := t.Spec()
		specs = append(specs, s)
		if s.Protected && !slices.Contains(protected, s.Name) {
			protected = append(protected, s.Name)
		}
	}
	slices.Sort(protected)
	for _, g := range UnmatchedGrants(f.Grant, specs) {
		which := "this run has no protected tools"
		if len(protected) > 0 {
			which = "its protected tools: " + strings.Join(protected, ", ")
		}
		fmt.Fprintf(w, "warning: --grant %s names no tool of this run, so it allows nothing (--grant takes a tool's exact name; %s)\n", g, which)
	}
	if f.DenyProtected {
		return // saved grants do not apply
	}
	path, err := f.path()
	if err != nil {
		return // the broker says so
	}
	s := Open(path)
	for _, spec := range specs {
		if !spec.Protected {
			continue
		}
		if _, ok := s.LegacyFor(spec.Name); !ok {
			continue
		}
		if origin := engine.OriginOf(spec); origin == engine.OriginBuiltin {
			fmt.Fprintf(w, "notice: %s: the name-only grant for %s (saved by an older lloyal) lets the built-in %s run without asking; answer A to it once more to bind it to the tool, or revoke it (lloyal grants revoke %s)\n", path, spec.Name, spec.Name, spec.Name)
		} else {
			fmt.Fprintf(w, "notice: %s: the name-only grant for %s (saved by an older lloyal) does not apply to %s from %s: a grant now binds to where a tool comes from, so it will ask\n", path, spec.Name, spec.Name, origin)
		}
	}
}
