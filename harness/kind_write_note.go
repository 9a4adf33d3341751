package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// writeNoteKind is `builtin: write_note`: saves a note in its entry's
// folder (--workspace overrides it). It is protected: a person approves
// each note it saves.
var writeNoteKind = kind{
	name:      "write_note",
	doc:       "(protected) into folder",
	build:     func(p *Program, t Tool) (engine.Tool, error) { return tools.WriteNoteTool(p.notes(t)) },
	protected: true,
	notes:     true,
	check: func(c *checker, at, name string, t Tool) {
		if t.Folder == "" {
			c.add(at, "write_note needs folder: where its notes are saved")
		}
		if t.ReadOnly {
			c.add(at+"/read_only", "tool %s is write_note, which is protected (a person approves each note it saves): read_only cannot change that; remove it", name)
		}
	},
}
