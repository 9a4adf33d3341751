package rerun

import (
	"fmt"
	"slices"
	"strings"
)

// dropped are the flags of the recorded command line a rerun sets itself:
// where the trace goes and how the run is shown.
var dropped = []string{"--trace", "--headless", "--jsonl"}

// RunArgs are the recorded `lloyal run` arguments (after "run") a rerun
// runs again, less the flags it sets itself (dropped). Typed follow-ups
// (--interactive, or the app's follow-up box) were input the trace does
// not hold as input, so such a run is refused.
func (r *Record) RunArgs() ([]string, error) {
	var out []string
	args := r.Header.CommandLine[2:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(a, "=")
		if name == "--interactive" {
			return nil, fmt.Errorf("%s was run with --interactive: the follow-ups typed then are not replayed; rerun runs with --follow-up", r.Path)
		}
		if !slices.Contains(dropped, name) {
			out = append(out, a)
			continue
		}
		if name == "--trace" && !hasValue {
			i++ // its value
		}
	}
	return out, nil
}
