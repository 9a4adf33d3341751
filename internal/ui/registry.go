package ui

import tea "github.com/charmbracelet/bubbletea"

// place is where the root draws a pane.
type place uint8

// Places. The left, main and bottom places hold one pane each (the first
// registered there) and are the focus ring, in that order: tab moves left
// → main → bottom (the bottom only while it is open).
const (
	placeNone   place = iota // no box: the pane shows only through its Line (liner), if at all
	placeLeft                // the left column
	placeMain                // the right column
	placeOver                // the right column instead of the main pane, while Open (opener)
	placeBottom              // the strip under both columns, while d opens it
)

// paneSpec registers one pane with the root.
type paneSpec struct {
	// make builds the pane for an app (nil: none on this screen, as the
	// transport outside a replay). The panes the root coordinates by name
	// (the tree's selection resets the detail's scroll, a replay seeks from
	// the dev pane, …) are also kept in a field of m.
	make  func(m *Model) pane
	place place
	// modal: while open (opener) or typing, it is on the modal stack and is
	// offered keys before the global keys (routing step 2).
	modal bool
	// keyLine: while it is typing, the key line shows its keys (and
	// ctrl+c) instead of the usual ones.
	keyLine bool
}

// panes registers every pane of the app: adding a pane is one file and one
// line here. Their order is the routing order (doc.go): open text inputs
// are offered keys in this order (step 1), the modal stack is this order
// top first (step 2), the first open over-pane is the one drawn, the
// panes' lines above the key line come in this order, and so do the
// modals' rows of the ? screen.
var panes = []paneSpec{
	{make: (*Model).makeFork, place: placeOver, keyLine: true},
	{make: (*Model).makeApproval, place: placeOver, modal: true},
	{make: (*Model).makeDev, place: placeBottom},
	{make: (*Model).makeFollowUp, keyLine: true},
	{make: (*Model).makeDetail, place: placeMain},
	{make: (*Model).makeTransport, modal: true},
	{make: (*Model).makeTree, place: placeLeft},
}

// mounted is a registered pane as this app built it.
type mounted struct {
	pane
	paneSpec
}

// mount builds every registered pane and the focus ring.
func (m *Model) mount() {
	for _, spec := range panes {
		if p := spec.make(m); p != nil {
			m.panes = append(m.panes, mounted{p, spec})
		}
	}
	for _, pl := range []place{placeLeft, placeMain, placeBottom} {
		if p := m.at(pl); p != nil {
			m.focusable = append(m.focusable, p)
		}
	}
}

// at is the pane registered at a place (the first, for placeOver and
// placeNone), or nil.
func (m *Model) at(pl place) pane {
	for _, p := range m.panes {
		if p.place == pl {
			return p.pane
		}
	}
	return nil
}

// isOpen reports whether a pane that is there only at times (opener) is
// there now; any other pane always is.
func isOpen(p pane) bool {
	o, ok := p.(opener)
	return !ok || o.Open()
}

// isTyping reports whether a pane takes keys first now (typer).
func isTyping(p pane) bool {
	t, ok := p.(typer)
	return ok && t.Typing()
}

// The panes the root coordinates by name, kept in its fields as they are
// made.

func (m *Model) makeFork() pane { m.fork = newFork(m.s); return m.fork }

func (m *Model) makeApproval() pane { m.approval = newApproval(m.s); return m.approval }

// makeDev makes the dev pane: enter on a timeline segment selects the
// event that began it, and in a replay also seeks there; a replay's
// timeline spans the whole trace.
func (m *Model) makeDev() pane {
	m.dev = newDev(m.s)
	m.dev.jump = func(id uint64) tea.Cmd { m.dev.selectEvent(id); return nil }
	if m.o.Replay != nil {
		m.dev.total, m.dev.jump = m.o.Replay.total, m.jumpTo
	}
	return m.dev
}

func (m *Model) makeFollowUp() pane { m.followUp = newFollowUp(m.s); return m.followUp }

func (m *Model) makeDetail() pane { m.detail = newDetail(m.s); return m.detail }

// makeTransport makes the transport, in a replay only.
func (m *Model) makeTransport() pane {
	if m.o.Replay == nil {
		return nil
	}
	m.transport = newTransport(m.s, m.o.Replay, m.applyStep)
	return m.transport
}

// makeTree makes the tree; moving its selection puts the detail pane back
// at the bottom of the newly selected agent.
func (m *Model) makeTree() pane {
	m.tree = newTree(m.s, func() { m.detail.scroll = 0 })
	return m.tree
}
