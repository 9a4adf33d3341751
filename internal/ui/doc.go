// Package ui is lloyal's terminal app (Bubble Tea): the agent tree, the
// selected agent's stream and tool timeline, the context gauge, the dev pane
// of live trace events, approval prompts answered by keypress, and replay.
//
// The engine never sees this package: events arrive as event.Event values in
// batches (Bridge, about every 16 ms) and are folded into fold.State, the
// same fold the headless log and `trace stats` read. Panes only draw that
// state; none of them interprets events itself.
//
// # Layout
//
// The root Model owns the layout, the focus, a modal stack and the routing,
// over the panes registered in registry.go. Each pane is a struct in its own
// file with Update, View, Title and its own key help (the pane interface,
// pane.go): tree.go (the agents: the left column), detail.go (the selected
// agent: the right column), approval.go (the approval prompt: a modal over
// the detail pane), fork.go (a replay's fork editor, over the detail pane),
// dev.go (events and their JSON: the bottom strip, which d opens),
// followup.go (the "follow up:" input, a line above the key line, while
// the program waits for a question) and transport.go (a replay's bar and
// keys: a modal, a line).
//
// # Adding a pane
//
// A new pane is one new file and one line in the panes table of
// registry.go; app.go needs no edit. The file declares the pane (its type,
// constructor and methods); the line says how the root builds it and where
// it goes, for example
//
//	{make: func(m *Model) pane { return newNotes(m.s) }, place: placeOver, modal: true},
//
// Its place puts it on the screen: the left or the right column, over the
// right column while it is open, the bottom strip, or no box at all; modal
// puts it on the modal stack while it is open; keyLine gives it the key
// line while it types. Anything more it says by implementing the optional
// interfaces of pane.go, which the root looks for on every registered pane:
// typer (it takes keys first while typing), picker (what it takes are
// commands, not text), opener (it is there only at times), liner (a line
// above the key line), focusTaker (it is told when it has the focus) and
// receiver (messages of its own). Its keys show on the ? screen by its
// place: the columns' in the first row, the bottom strip's in the second,
// each modal's in a row of its own. A key that works whatever has the focus
// is a global key (keys.go and Model.global), not a pane's.
//
// # Routing
//
// A key goes to the first of these that takes it:
//
//  1. a pane that is typing, in the order of the panes table: the fork
//     editor of a replay, a deny reason, the dev filter, the "follow up:"
//     question a finished run asks (while it has the focus), the detail
//     pane's token picker. A text input takes every key until it closes
//     (Enter or Esc; ctrl+s forks from the fork editor), but Ctrl-C, which
//     goes on to the root (and closes the fork editor: the next Ctrl-C
//     reaches the root), and Tab in the "follow up:" input, which goes on
//     to the focus key. The picker, while a token is picked, takes ←, →, ?
//     and Esc; other keys go on down this list;
//  2. the modal stack, top first (the order of the panes table): the
//     approval prompt while a call waits for an answer, then (in a replay)
//     the transport;
//  3. the global keys: Ctrl-C, quit, help, fork (a replay), focus, dev
//     pane, inspect, filter, freeze, pause, finish up, cancel. While the
//     program waits for a follow-up question, Ctrl-C answers it with none
//     first, and q (out of the input) answers it with none instead of
//     quitting: the session ends as Esc in the input ends it, and q then
//     quits as after any run;
//  4. the focused pane (tab moves the focus from the left column to the
//     right column to the bottom strip while it is open: tree, detail,
//     dev; then, while the program waits for a question, to the "follow
//     up:" input, and from it to the tree). Enter, while the program waits
//     for a question and the focused pane does not take it, gives the
//     input the focus back.
//
// Keys that arrived together in one read ("jj" on a busy machine) are
// routed one by one, unless a text input is open: it takes them as typed.
//
// Other messages (window size, event batches, the clock) go to the root,
// which hands the panes what they need; a message the root does not know
// goes to the panes that receive messages of their own (receiver).
package ui
