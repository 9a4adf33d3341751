// Package engine is lloyal's agent runtime: tools, pools of agents forked
// from a shared spine, the tick loop that decodes one token for every active
// agent in one batch, orchestrators, and the event stream that feeds both the
// trace file and the terminal UI.
//
// # Backends
//
// The runtime talks to the model through one of two interfaces, one
// constructor each: New takes a Backend and runs the decode loop
// (decoder, decode.go), NewOnServer takes a TurnBackend and runs the server
// turn loop (serverLoop, serverloop.go). Both loops satisfy one small
// internal interface, turnLoop (turns.go): produce a tick of turns, write a
// stopped agent's report alone, and abort, wait for and take what is in
// flight between ticks (nothing, locally). Everything else a pool does runs
// on a branchStore (backend.go): a Backend's branches, or a server's kept
// as text (serverCells), which has no cell-level calls at all.
//
// Backend is cell-level: a model in this process with one context whose
// unified KV cache holds every branch. engine/llamabackend is the real one
// (llama.cpp through engine/llamacpp/kv); tests of the scheduler use a
// scripted double (engine/enginetest). Every Backend call is made by the
// goroutine running a pool's tick loop, never concurrently.
//
// TurnBackend is turn-level: a model on an inference server
// (engine/serverbackend), which takes a whole prompt and streams one turn
// back. The runtime keeps each branch as rendered text, so the spine is a
// byte-identical prefix of every agent's prompt (what a server's prefix cache
// reuses), and sends a thinking agent's whole conversation as one request,
// on its own goroutine, at most Options.MaxInflight at once. The answer
// streams into the loop the way a fanout tool's result does; tools,
// approvals, nudges, recovery, wind-down, cancel and every event are the
// same code on both.
//
// # The pool by concern
//
// A running pool (pool.go) holds what all of its parts read (spec, tools,
// spine, agents, the pressure gauge) and coordinates them: it opens and
// closes, runs the tick loop and the wait between ticks, takes commands,
// and gives every agent its outcome (finish, outcome.go). The state each
// concern changes belongs to one sub-state, which the others reach only
// through its methods:
//
//   - admission (admission.go, results.go): the queues of what waits to be
//     written into the context (spawns, spine extensions, results,
//     refusals, recovery prompts, follow-ups), the one prefill a tick
//     writes them in, and a rerun's place in the recorded prefills.
//   - dispatcher (dispatch.go, approval.go): tool calls from the turn that
//     made them to their result: this tick's calls, fanout tools and their
//     limit, retries, approvals, and the channels results come back on.
//   - turns (turns.go, endturn.go, returns.go): arming a turn (sampling,
//     grammar) and reading a finished one (a call, a refusal, an answer,
//     the one budget nudge a tick), over the pool's turnLoop: decoder
//     (decode.go, forced.go, record.go) or serverLoop (serverloop.go, which
//     owns the requests in flight).
//   - stops (stops.go, recovery.go): wind-down, the per-tick stops (reap;
//     one critical kill a tick), the stall-break, and recovery reports.
//
// Beside them, toolset (toolset.go) is the pool's compiled tools and
// grammars, and gauge (pressure.go) reads how full the context is against
// the pool's limits. A tick runs: commands and completions, admission's
// prefill (or the stall-break), the dispatcher's calls, then the turns.
//
// # Invariants that hold only on the local backend
//
// The numbered invariants (INVARIANTS.md) hold on both backends except
// these, and for these reasons:
//
//   - 1, 2 (no overlapping native calls; spawns share one prefill) and 50
//     (recovery tokens ride the same decode batch): they are about the one
//     llama.cpp context. A server gets concurrent requests by design; how it
//     batches them is its own.
//   - 7 (an agent never samples between its call and its result) holds, but
//     trivially: a turn is one request, sent only when the agent is thinking.
//   - Pressure is measured differently. Locally the cells used are the one
//     cache every agent shares, counted exactly. On a server every request
//     must fit the context on its own and the server manages its cache, so
//     pressure is the longest conversation against the server's context, in
//     tokens: the server's own count of what it has seen (its last answer's
//     prompt and completion tokens) and an estimate of what came since
//     (bytes over the bytes-per-token its counts have shown, three before
//     the first answer), never above the context. Nudges, kills and
//     admission act on that figure.
//   - 57 (staggered recovery is blocking, writing until the context is
//     exhausted): a server has no token-at-a-time loop to block on, so every
//     recovery on a turn-level backend is in-loop, one more turn capped by its
//     report budget.
//   - Content is never read as markup (a tool result containing "<|im_end|>"
//     cannot close a turn): locally markers and content are tokenized apart.
//     A raw-prompt server tokenizes the whole prompt with special tokens
//     parsed, so on a server this rests on the server; TurnRequest.Segments
//     carries the split for servers that can take it.
//   - Grammars: locally the GBNF grammar constrains sampling, lazily armed
//     by a call's opening. On a server a forced call (a plan step, the
//     terminal tool, ToolRequired) is sent as its JSON Schema and wrapped in
//     the format's call markers afterwards; a lazy grammar (ToolAuto) is not
//     sent at all, so a malformed call comes back as a nudge instead of being
//     prevented.
package engine
