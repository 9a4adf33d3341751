package harness

import (
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// A built-in tool kind is what a tool entry's `builtin: NAME` makes. Each
// kind is a file of its own (kind_NAME.go) declaring a kind, registered by
// one line in kinds: from that the harness builds the kind's tools
// (Program.tool), `lloyal harness schema` lists it (builtinSchema,
// narrowSchema) and `lloyal harness check` checks its entries
// (checker.tool).

// kinds are the built-in tool kinds, in the order the schema lists them.
var kinds = []kind{
	searchKind,
	readFileKind,
	grepKind,
	glossaryKind,
	fetchPageKind,
	writeNoteKind,
	readAttachmentKind,
}

// kind is one built-in tool kind. A kind either reads a corpus (read) or
// builds its tool otherwise (build).
type kind struct {
	// name is what an entry writes after builtin:.
	name string
	// doc is what the schema's description of builtin says after the
	// kind's name ("over corpus"); kinds listed one after another that
	// say the same are named together ("search and grep over corpus").
	doc string
	// read makes the tool of a kind that reads a corpus: the entry's
	// corpus folder (default: the built-in handbook; --corpus overrides
	// it). The harness watches the tool: what it shows an agent, that
	// agent may cite.
	read func(c *corpus) engine.Tool
	// ranked is read with a service scoring its candidates (a tool's
	// rerank:), for a kind that can take one (nil: it cannot).
	ranked func(c *corpus, r tools.Reranker, scorer string) engine.Tool
	// build makes the tool of a kind that reads no corpus.
	build func(p *Program, t Tool) (engine.Tool, error)
	// narrow is the narrowing an entry of the kind may ask for (its
	// narrow:, "" for none), narrowed applies it to the watched tool, and
	// narrowDoc says what it narrows, as the schema's description of
	// narrow does.
	narrow    string
	narrowed  func(c *corpus, tl engine.Tool) engine.Tool
	narrowDoc string
	// guards are the named guards (engine.NamedGuard) the kind's tools
	// carry unless their entry names others.
	guards []string
	// protected: every call asks first (a person approves it), and no
	// entry or profile can change that.
	protected bool
	// notes: the tool saves the run's notes in its entry's folder
	// (Program.Notes), and a grounded publisher's note is fixed to the
	// findings' claims.
	notes bool
	// attachments: the tool shows the run's attachments, and a role is
	// offered it only when the run has some.
	attachments bool
	// check adds what is wrong with an entry of the kind, at the JSON
	// pointer at, beyond the schema and what every built-in tool is
	// checked for (nil: nothing more).
	check func(c *checker, at, name string, t Tool)
}

// kindOf is the built-in tool kind named name.
func kindOf(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

// builtinKind is the entry's built-in tool kind (the zero kind when it is
// no built-in tool).
func (t Tool) builtinKind() kind {
	k, _ := kindOf(t.Builtin)
	return k
}

// overCorpus is what the schema says of the kinds that read a corpus.
const overCorpus = "over corpus"

// builtinSchema is the schema of a tool entry's builtin: the kinds' names,
// and what each is.
func builtinSchema() enumSchema {
	var names, said []string
	for i := 0; i < len(kinds); {
		var group []string // the kinds from the i-th that say the same
		for ; i < len(kinds) && (len(group) == 0 || kinds[i].doc == kinds[i-1].doc); i++ {
			group = append(group, kinds[i].name)
		}
		names = append(names, group...)
		said = append(said, andList(group)+" "+kinds[i-1].doc)
	}
	return enumSchema{Enum: names, Description: "one of lloyal's tools: " + strings.Join(said, "; ")}
}

// delegateNarrowing is the narrowing a delegate tool may ask for, which
// is no built-in kind's, and what it narrows.
const (
	delegateNarrowing    = NarrowSubQuestions
	delegateNarrowingDoc = "a delegate's tasks to the clauses of the agent's question and the glossary terms it read"
)

// narrowSchema is the schema of a tool entry's narrow: the kinds'
// narrowings, then a delegate's, and what each narrows.
func narrowSchema() enumSchema {
	var names, said []string
	for _, k := range kinds {
		if k.narrow != "" {
			names = append(names, k.narrow)
			said = append(said, k.narrowDoc+" ("+k.narrow+")")
		}
	}
	names = append(names, delegateNarrowing)
	said = append(said, delegateNarrowingDoc+" ("+delegateNarrowing+")")
	return enumSchema{Enum: names, Description: "narrow the model's arguments by grammar, for a small model: " + strings.Join(said, "; ")}
}

// narrowedTool is what a narrowing is for: a built-in kind's name, or
// "delegate" (ok false: no such narrowing).
func narrowedTool(narrow string) (tool string, ok bool) {
	if narrow == delegateNarrowing {
		return "delegate", true
	}
	for _, k := range kinds {
		if k.narrow != "" && k.narrow == narrow {
			return k.name, true
		}
	}
	return "", false
}

// enumSchema is a JSON Schema of one of a list of strings.
type enumSchema struct {
	Enum        []string `json:"enum"`
	Description string   `json:"description"`
}

// andList is names as a sentence lists them: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
