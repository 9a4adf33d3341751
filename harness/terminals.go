package harness

import (
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
)

// A built-in terminal is what a role's `terminal: {builtin: NAME}` makes,
// as a built-in tool kind is what a tool's `builtin:` makes (kinds.go):
// each is a file of its own (terminal_NAME.go) declaring a terminalKind,
// registered by one line in terminalKinds. From that the harness builds
// the role's terminal tool (Program.terminal), `lloyal harness check`
// checks the entry (checker.terminal), and TestSchemaListsEveryTerminal
// holds the schema's list of names to it.

// terminalKinds are the built-in terminals, in the order the schema lists
// them.
var terminalKinds = []terminalKind{
	planTerminal,
	reportTerminal,
	publishTerminal,
}

// terminalKind is one built-in terminal.
type terminalKind struct {
	// name is what a terminal writes after builtin:; tool is its tool's
	// name when another ("" : name); doc is what the schema's description
	// of builtin says of it after its name.
	name, tool, doc string
	// build makes the role's terminal tool; results are the results of
	// the steps before, by step id.
	build func(p *Program, r Role, results map[string][]engine.AgentResult) (engine.Tool, error)
	// narrow: the terminal takes narrow: clauses.
	narrow bool
	// lists are the list fields of its result, which a later step's
	// each_item may name.
	lists []string
	// fixedNote: when grounded, the role's note tools save the findings'
	// claims (research.GroundedNote) whatever the model writes.
	fixedNote bool
	// check adds what is wrong with the entry at the JSON pointer at,
	// beyond what every built-in terminal is checked for (nil: nothing).
	check func(c *checker, at string, t Terminal)
}

// terminalKindOf is the built-in terminal named name.
func terminalKindOf(name string) (terminalKind, bool) {
	for _, k := range terminalKinds {
		if k.name == name {
			return k, true
		}
	}
	return terminalKind{}, false
}

// terminalSchema is the schema of a terminal's builtin: the built-in
// terminals and what each is.
func terminalSchema() enumSchema {
	var names, said []string
	for _, k := range terminalKinds {
		names = append(names, k.name)
		said = append(said, k.name+": "+k.doc)
	}
	return enumSchema{Enum: names, Description: strings.Join(said, "; ")}
}
