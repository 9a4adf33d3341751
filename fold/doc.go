// Package fold is the one fold of lloyal's event vocabulary (engine/event):
// State turns a stream of events into what the terminal app draws, the
// sentences of the headless log (trace.Log), `trace stats`, a replay and
// the end-of-run summary.
//
// The vocabulary stays in engine/event, which imports nothing of ours; the
// fold lives here, beside its readers, because what a reader shows changes
// with the screen, not with the engine: a new on-screen fact is an edit in
// this package, never in the engine tree. Every reader folds with the same
// State, so the screen, the log, the stats and a replay cannot disagree.
//
// Files: state.go (State, and Apply, the one entry), apply.go (what each
// event changes and the sentence the log writes for it), agent.go (an
// agent and its timeline), lanes.go (an agent's time as segments).
package fold
