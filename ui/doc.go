// Package ui is lloyal's terminal app (Bubble Tea): the agent tree, the
// selected agent's stream and tool timeline, the context gauge, the dev pane
// of live trace events, approval prompts answered by keypress, and replay.
//
// The engine never sees this package: events arrive as event.Event values in
// batches (Bridge, about every 16 ms) and are folded into event.State, the
// same fold the headless log and `trace stats` read. Panes only draw that
// state; none of them interprets events itself.
//
// # Layout
//
// The root Model owns the layout, the focus, a modal stack and the routing.
// Each pane is a struct in its own file with Update, View and its own key
// help: tree.go (agents), detail.go (the selected agent), approval.go (the
// approval prompt, a modal), dev.go (events and their JSON) and
// transport.go (replay). Adding a pane is one new file and one line in New.
//
// # Routing
//
// A key goes to the first of these that takes it:
//
//  1. a text input that is open (the fork editor of a replay, the dev
//     filter, a deny reason, the "follow up:" question a finished run asks
//     for) takes every key until
//     Enter or Esc closes it (Ctrl-C still reaches the root); the detail
//     pane's token picker, while a token is picked, takes ←, →, ? and Esc
//     (other keys go on down this list);
//  2. the modal stack, top first: the approval prompt while a call waits
//     for an answer, then (in a replay) the transport;
//  3. the global keys: quit, Ctrl-C, help, focus, dev pane, pause, finish
//     up, cancel;
//  4. the focused pane (tab moves the focus between tree, detail and dev).
//
// Other messages (window size, event batches, the clock) go to the root,
// which hands the panes what they need.
package ui
