package event

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// info is what the vocabulary says about one type.
type info struct {
	kind Kind
	// quiet: the headless log leaves it out (its content reaches the log
	// through another event: tick text through the turn, for example).
	quiet bool
	// doc says what the event tells; docs/trace-format.md prints it.
	doc string
	// fields says what a key means for this type where the general meaning
	// (fieldDocs) is not enough; a key only some events of the type fill
	// is listed here even when the example leaves it out.
	fields map[string]string
	// example is a typical event of the type, envelope aside: the trace
	// format document prints the writer's encoding of it.
	example Event
}

// entry is one type of the catalog, in the order event.go declares them.
type entry struct {
	typ Type
	info
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// entries lists every type. A type missing here is unknown to every reader;
// TestEveryTypeIsInTheCatalog fails when a constant of event.go is not
// listed, TestEveryTypeIsDocumented when an entry lacks its doc or example.
var entries = []entry{
	{PoolOpen, info{
		doc: "A pool opened. Its id is the scope of everything that happens in it: the pool and parent of its events. A pool opened by a tool, inside a run, is nested.",
		fields: map[string]string{
			"parent": "the id of the enclosing pool's pool:open (absent for the run's first pool)",
			"agent":  "the agent whose tool call opened this nested pool (absent for a top pool)",
			"data":   "the pool's settings: tools (the names offered), terminal (the tool that ends an agent), maxTurns, toolChoice (auto, required or a tool's name)",
		},
		example: Event{Parent: 1, Agent: 2, CellsUsed: 412, NCtx: 4096,
			Data: raw(`{"maxTurns":8,"terminal":"report","toolChoice":"auto","tools":["search","report"]}`)},
	}},
	{PoolClose, info{
		doc: "A pool closed: every agent of it has an outcome.",
		fields: map[string]string{
			"tokens": "tokens its agents generated, all together",
			"reason": "the error that ended the pool early (absent when it ran to the end)",
			"data":   "one object per agent: id, parentId, task, outcome, result, source, reason, tokens, toolCalls, turns",
		},
		example: Event{Parent: 1, Pool: 1, Tokens: 45, Duration: 63536330, CellsUsed: 231, NCtx: 4096,
			Data: raw(`[{"id":1,"task":"alpha","outcome":"returned","result":{"result":"alpha done"},"source":"voluntary_return","tokens":39,"toolCalls":2,"turns":2}]`)},
	}},
	{PoolTick, info{kind: KindTick, quiet: true,
		doc: "One batched decode: every thinking agent got one token, and the text its grammar then forced.",
		fields: map[string]string{
			"tokens": "tokens decoded in this tick (one sampled per agent in texts, and those forced)",
			"forced": "per agent id, the tokens its grammar forced after its sampled one (jump-forward decoding)",
			"counts": "per agent id, the tokens it wrote in the tick where more than one (forced text, or a server's pieces that came together)",
			"role":   "recovery when the tick wrote a stopped agent's report one token at a time",
			"probs":  "with --trace-logprobs: what the model thought of each agent's token",
		},
		example: Event{Parent: 1, Pool: 1, Tokens: 2, CellsUsed: 249, NCtx: 4096, Texts: map[int]string{1: "<too", 2: "thin"}},
	}},
	{PoolWindDown, info{
		doc: "The run was asked to finish up: nothing new starts and every working agent writes its report.",
		fields: map[string]string{
			"reason": "why (finish up)",
		},
		example: Event{Reason: "finish up"},
	}},
	{PoolPause, info{
		doc:     "The run paused: no model call happens until pool:resume (tools already running go on).",
		example: Event{},
	}},
	{PoolResume, info{
		doc: "The run resumed after a pause.",
		fields: map[string]string{
			"duration": "how long it was paused, in nanoseconds (paused time does not count against agents' time budgets)",
		},
		example: Event{Duration: 2500000000},
	}},
	{PoolNote, info{
		doc: "A remark of the runtime or an orchestrator about the pool: something waits, something was skipped.",
		fields: map[string]string{
			"role":   "the note's name: slot_wait, extend_held, extend_refused, waiting_for_room, dag:skip, follow_up, trunk_summarised, trunk_cut, trunk_full, diverge_fallback, …",
			"agent":  "the agent the note is about, if one",
			"tokens": "the tokens that wait, if the note is about room",
			"reason": "the note in words",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 3, Role: "slot_wait", Reason: "every branch slot is in use: the agent starts when another finishes"},
	}},
	{PoolDiverge, info{
		doc: "Best-of-N decided one task: its candidates (agents forked from the same point and decoded together to their terminal calls), each one's outcome and perplexity, and the one kept; the others' results are discarded (their agent results say discarded).",
		fields: map[string]string{
			"data": "task; by (perplexity: the lowest kept, or the judge service that picked); candidates: agent, outcome, ppl, score (the judge's, where one picked); kept: the kept candidate's agent",
		},
		example: Event{Parent: 1, Pool: 1, Data: raw(`{"task":"What is a harbor?","by":"perplexity","candidates":[{"agent":2,"outcome":"returned","ppl":3.412},{"agent":3,"outcome":"returned","ppl":2.871}],"kept":3}`)},
	}},
	{SpawnRefused, info{kind: KindFailure,
		doc: "An agent could not start.",
		fields: map[string]string{
			"text":   "its task",
			"tokens": "the tokens its task takes",
			"reason": "why (a reason code such as pressure_init, or a sentence)",
		},
		example: Event{Parent: 1, Pool: 1, Text: "summarise every file", Tokens: 3900, Reason: "pressure_init"},
	}},
	{SettleDeferred, info{quiet: true,
		doc: "Something an agent must read (a tool result, a nudge, a report prompt) waits for room in the context.",
		fields: map[string]string{
			"role":   "what waits: toolResult, nudge, followup or recovery",
			"tokens": "its size in tokens",
			"reason": "how much room it needs and how much there is",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Role: "toolResult", Tokens: 812, Reason: "needs 812 cells, 300 free above the soft limit"},
	}},
	{AgentDrop, info{kind: KindFailure,
		doc: "The runtime stopped an agent; it writes a recovery report next (agent:recovered or agent:failed follows).",
		fields: map[string]string{
			"reason": "a reason code: pressure_critical, pressure_softcut, wind_down, time_exceeded, max_turns, decode_failed, settle_stall_break, server_error, …",
			"ids":    "the tokens it had sampled in the turn it was stopped in (a model in this process)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Reason: "pressure_critical"},
	}},
	{RecoveryStart, info{
		doc: "A stopped agent starts writing its report.",
		fields: map[string]string{
			"reason": "why it was stopped (the agent:drop's reason)",
			"tokens": "the report's budget in tokens",
			"data":   "shape: staggered (one report at a time) or in_loop (reports written beside live agents)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Reason: "pressure_critical", Tokens: 400, Data: raw(`{"shape":"staggered"}`)},
	}},
	{RecoveryReturn, info{quiet: true,
		doc: "A stopped agent's report is in (agent:recovered follows).",
		fields: map[string]string{
			"tokens": "the report's length in bytes",
			"reason": "how it was got when it was salvaged from a cut-off call",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Tokens: 118, Reason: "salvaged a truncated report"},
	}},
	{RecoveryFailed, info{kind: KindFailure,
		doc: "A stopped agent's report could not be got (agent:failed follows).",
		fields: map[string]string{
			"reason": "why: no_terminal_call, empty_terminal_result, scope_error: …",
			"text":   "the last 200 characters it wrote",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Reason: "no_terminal_call", Text: "I could not find the answer in the files I read"},
	}},
	{SpineCreate, info{
		doc: "The shared prefix every agent of a pool forks from (system prompt and tools) was written into the context.",
		fields: map[string]string{
			"branch": "the spine's branch",
			"text":   "the spine as the model reads it, chat template applied",
			"tokens": "its length in tokens",
			"role":   "spine",
			"ids":    "its token ids",
		},
		example: Event{Parent: 1, Branch: 1, Text: "<|im_start|>system\nYou research questions.<|im_end|>\n", Tokens: 231, Role: "spine", CellsUsed: 231, NCtx: 4096, IDs: []int32{151644, 8948, 198}},
	}},
	{SpineExtend, info{
		doc: "An exchange was appended to the spine, so every later agent of the pool reads it.",
		fields: map[string]string{
			"branch": "the spine's branch",
			"text":   "the question (the user's side of the exchange)",
			"result": "the answer (the assistant's side), as JSON",
			"tokens": "the tokens the exchange added",
			"ids":    "their token ids",
		},
		example: Event{Parent: 1, Pool: 1, Branch: 1, Text: "What did the first researcher find?", Result: raw(`"Three sources agree on 1912."`), Tokens: 24, CellsUsed: 255},
	}},
	{BranchPrefill, info{quiet: true,
		doc: "Tokens were written into an agent's branch without sampling (its task, a tool result, a nudge), or its branch was pruned.",
		fields: map[string]string{
			"role":   "what was written: suffix (the task), toolResult, nudge, followup (what a tool's AfterAdmit asked the agent to read after a result), recovery, server (a turn a server evaluated), prune (the branch was freed)",
			"tokens": "tokens written",
			"text":   "what was written, chat template applied (a model in this process)",
			"ids":    "its token ids (a model in this process)",
			"callId": "the call a toolResult or nudge answers",
			"data":   "for role server: promptTokens (the prompt's length), evaluated (prompt tokens the server did not have cached), tokens (the answer's); when images were written for a model here to see: images, each {id, name, mimeType, sha256 (its bytes kept beside the trace), positions (the cells its embeddings filled, -1 in ids)}",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, Tokens: 4, Role: "suffix", CellsUsed: 247, Unique: 16, Text: "<|im_start|>user\nFind it<|im_end|>\n<|im_start|>assistant\n", IDs: []int32{151644, 872, 198, 9885}},
	}},
	{AgentSpawn, info{
		doc: "An agent started.",
		fields: map[string]string{
			"branch": "its branch, forked from the spine",
			"text":   "its task",
			"role":   "the name a harness gave it (planner, researcher, …), if any",
			"tokens": "its task's length in tokens",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 3, ParentAgent: 1, Branch: 4, Text: "Find when the bridge opened", Role: "researcher", Tokens: 16},
	}},
	{AgentTurn, info{kind: KindTurn,
		doc: "An agent finished a turn: everything it wrote between two tool results.",
		fields: map[string]string{
			"text":   "the turn's raw output",
			"tokens": "tokens the turn took",
			"role":   "recovery when the turn was a stopped agent's report",
			"ids":    "every token it sampled, its stop token included (a model in this process)",
			"data":   "the turn parsed: turn (its number), content, reasoning, calls (how many tool calls it made); how it was sampled: sampling (temperature, topK, topP, minP, seed, repeatPenalty, repeatLastN), grammar (the sha256 prefix of the GBNF in force, absent when none) and grammarText (the GBNF, the first time the run uses it)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Text: "<think>The file names it.</think>It opened in 1912.", Tokens: 14, IDs: []int32{151667, 785, 1034},
			Data: raw(`{"calls":0,"content":"It opened in 1912.","reasoning":"The file names it.","sampling":{"temperature":0.7,"topK":40,"topP":0.95,"minP":0.05,"seed":7920},"turn":1}`)},
	}},
	{AgentToolCall, info{kind: KindToolCall,
		doc: "An agent called a tool.",
		fields: map[string]string{
			"args": "the arguments as the model wrote them (the tool's own keys)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "search", Args: raw(`{"query":"bridge opening year"}`)},
	}},
	{AgentNudge, info{
		doc: "A call was refused and the agent was told why, as the call's result; it goes on thinking. With reason loop, its turn fell into a loop (one n-gram over and over) and was stopped there: what it wrote before stands (a report is salvaged), or it is asked again.",
		fields: map[string]string{
			"reason": "a reason code: invalid_arguments, unknown_tool, denied, guard, loop, settle_reject, …",
			"result": "what the model reads (none when a loop's text stands)",
			"text":   "with reason loop: the turn's text up to the loop, one copy of what repeats kept",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_2", Tool: "search", Reason: "invalid_arguments",
			Result: raw(`{"error":"query: required"}`)},
	}},
	{AgentReturn, info{
		doc: "An agent ended with its answer.",
		fields: map[string]string{
			"tokens": "tokens it generated in all",
			"result": "its report: the terminal tool's arguments, or its text when it answered in plain text",
			"data":   "source: voluntary_return (it called the terminal tool) or free_text; " + pplDoc,
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, Tokens: 39, Result: raw(`{"result":"It opened in 1912.","sources":["notes/bridge.md"]}`),
			Data: raw(`{"ppl":3.412,"samplingPpl":1,"source":"voluntary_return"}`)},
	}},
	{AgentRecovered, info{
		doc: "A stopped agent ended with the report it wrote after it was stopped.",
		fields: map[string]string{
			"reason": "why it was stopped",
			"tokens": "tokens it generated in all",
			"result": "its report",
			"data":   pplDoc,
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Reason: "time_exceeded", Tokens: 310, Result: raw(`{"result":"Partial: two of three sources read."}`)},
	}},
	{AgentFailed, info{kind: KindFailure,
		doc: "An agent ended without a result.",
		fields: map[string]string{
			"reason": "why",
			"tokens": "tokens it generated in all",
			"data":   pplDoc,
		},
		example: Event{Parent: 1, Pool: 1, Agent: 2, Reason: "recovery failed: no_terminal_call", Tokens: 512},
	}},
	{AgentCancelled, info{
		doc: "An agent was discarded: cancelled by a person, its caller or the end of the run.",
		fields: map[string]string{
			"reason": "why",
			"tokens": "tokens it generated in all",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 3, Reason: "cancelled by the user", Tokens: 88},
	}},
	{AgentDone, info{quiet: true,
		doc:     "An agent stopped working (its outcome event follows, at once or after its report).",
		example: Event{Parent: 1, Pool: 1, Agent: 2},
	}},
	{ToolDispatch, info{quiet: true,
		doc: "A tool call started running. Its id is the parent of the call's progress, result, retry, error and notes.",
		fields: map[string]string{
			"args":    "the arguments",
			"attempt": "which run of the call this is (1 is the first; a retry counts up)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "search", Args: raw(`{"query":"bridge opening year"}`), Attempt: 1},
	}},
	{ToolProgress, info{quiet: true,
		doc: "A running tool said how far it is. A tool may say it often: a call's progress is recorded at most ten times a second, its last report always, before the call's result.",
		fields: map[string]string{
			"parent": "the id of the call's tool:dispatch",
			"filled": "whole steps done of total (without a total: the whole part of data's value)",
			"total":  "the steps in all (absent when the tool cannot say: the app draws a moving bar)",
			"text":   "what the tool says it is doing (an MCP server's progress message)",
			"data":   "value: how far the tool is by its own count, fractions kept, when it cannot say the total",
		},
		example: Event{Parent: 31, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "search", Filled: 3, Total: 10},
	}},
	{ToolResult, info{
		doc: "A tool call returned; its result goes into the agent's context.",
		fields: map[string]string{
			"parent":   "the id of the call's tool:dispatch",
			"tokens":   "the result's length in tokens",
			"result":   "the result as the model reads it",
			"duration": "how long the call took, in nanoseconds",
		},
		example: Event{Parent: 31, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "search", Tokens: 39,
			Result: raw(`{"_contextAvailablePercent":99,"hits":["notes/bridge.md"]}`), Duration: 11012740},
	}},
	{ToolRetry, info{
		doc: "A call failed transiently and runs again after a delay (a model server's failed turn is retried the same way; its tool is then server).",
		fields: map[string]string{
			"parent":     "the id of the call's tool:dispatch",
			"attempt":    "the attempt that comes next",
			"retryAfter": "the delay before it, in nanoseconds",
			"reason":     "the failure",
		},
		example: Event{Parent: 31, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "search", Attempt: 2, RetryAfter: 1000000000, Reason: "429 Too Many Requests"},
	}},
	{ToolError, info{kind: KindFailure,
		doc: "A tool call failed; the agent reads the error as the call's result.",
		fields: map[string]string{
			"parent":   "the id of the call's tool:dispatch",
			"reason":   "the error",
			"duration": "how long the call took, in nanoseconds",
		},
		example: Event{Parent: 31, Pool: 1, Agent: 1, CallID: "call_1_1", Tool: "fetch_page", Reason: "fetch: connection refused", Duration: 20000000},
	}},
	{ToolNote, info{
		doc: "A remark of a tool about its work, recorded from inside the call (engine.TraceEvent). A call records at most 1,024 notes and funnels; past them one note named notes_left_out says so (data: written, the number recorded). A note named failed says the call failed though its agent reads the failure as the call's result and goes on (an ability whose server crashed, hung or answered an error): readers count it as the call's error, as a tool:error.",
		fields: map[string]string{
			"parent": "the id of the call's tool:dispatch",
			"role":   "the note's name, chosen by the tool (failed: the call failed; ability: an ability's server wrote a line on stdout that is not JSON-RPC; notes_left_out: the call wrote more notes than are recorded)",
			"data":   "the note, as the tool wrote it (the tool's own keys; an ability's: ability, event, reason, and line or restartsLeft)",
		},
		example: Event{Parent: 31, Agent: 1, CallID: "call_1_1", Tool: "search", Role: "cache", Data: raw(`{"hit":true}`)},
	}},
	{ToolFunnel, info{
		doc: "A retrieval's funnel, recorded from inside the call (engine.TraceFunnel): the first stage's candidates in its order, each scored by a service (a reranker), and those admitted within the tool's limit and budget: what the agent reads. The dev pane's Sources view shows each.",
		fields: map[string]string{
			"parent": "the id of the call's tool:dispatch",
			"data":   "query; scorer (the service and where it runs); question (exploiting: the agent's question, each score the lower of the query's and the question's); candidates: path, lines, first (the first stage's score), score (the scorer's), bytes, admitted; limit and budget (passages and bytes admitted at most); admitted and admittedBytes",
		},
		example: Event{Parent: 31, Agent: 1, CallID: "call_1_1", Tool: "search", Data: raw(`{"query":"tide tables","scorer":"ranker (ranker.gguf)","candidates":[{"path":"harbor.md","lines":"1-9","first":7.1,"score":2.3,"bytes":310,"admitted":true},{"path":"boats.md","lines":"4-12","first":7.4,"score":-1.2,"bytes":280}],"limit":1,"budget":1843,"admitted":1,"admittedBytes":310}`)},
	}},
	{SettleOrder, info{quiet: true,
		doc: "One prefill wrote into the context: agents' tasks, spine extensions, and what agents waited to read (tool results, nudges, recovery prompts), in the order written. A rerun writes the same at the same tick, so every cell lands where it did.",
		fields: map[string]string{
			"tokens": "the pool's decode ticks so far (the tick the prefill came before)",
			"data":   "one object per span, in the order written: agent (0 for a spine extension), role (suffix: a task; extend; toolResult, nudge, followup, recovery), callId (the call it answers, if one), tokens",
		},
		example: Event{Parent: 1, Pool: 1, Tokens: 42, Data: raw(`[{"agent":4,"role":"suffix","tokens":40},{"agent":2,"callId":"call_1_3","role":"toolResult","tokens":118},{"agent":3,"role":"nudge","tokens":31}]`)},
	}},
	{ApprovalRequested, info{kind: KindApproval,
		doc: "A call of a protected tool waits for a person to allow or deny it.",
		fields: map[string]string{
			"args": "the arguments",
			"text": "why the tool is protected: its description, as the model read it",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_3", Tool: "write_note", Args: raw(`{"name":"bridge.md"}`), Text: "Write a note to the notes folder."},
	}},
	{ApprovalAnswered, info{
		doc: "A protected call was answered.",
		fields: map[string]string{
			"reason":   "the reason given with a denial (the model reads it)",
			"duration": "how long the call waited, in nanoseconds",
			"data":     "answer (allow_once, allow_session, allow_always, deny) and by (user, timeout, cancel, policy, …)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_3", Tool: "write_note", Duration: 4200000000,
			Data: raw(`{"answer":"allow_once","by":"user"}`)},
	}},
	{ApprovalDuplicate, info{
		doc: "A second answer to a call that was already answered; it was ignored.",
		fields: map[string]string{
			"reason": "that it was ignored",
			"data":   "the ignored answer: answer, reason, by",
		},
		example: Event{CallID: "call_1_3", Reason: "ignored: the first answer already decided this call", Data: raw(`{"answer":"deny","by":"user"}`)},
	}},
	{ApprovalAuto, info{kind: KindApproval,
		doc: "A protected call ran without asking: a grant allowed it.",
		fields: map[string]string{
			"args":   "the arguments",
			"reason": "the grant's source: who allowed the tool, and how (--grant, allowed for this session, a saved grant, the program)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 1, CallID: "call_1_4", Tool: "write_note", Args: raw(`{"name":"bridge.md"}`), Reason: "allowed for this session"},
	}},
	{RuntimeCommand, info{quiet: true,
		doc: "The runtime received a command for an agent from the app.",
		fields: map[string]string{
			"reason": "the command (cancel)",
		},
		example: Event{Parent: 1, Pool: 1, Agent: 3, Reason: "cancel"},
	}},
	{ReplayError, info{kind: KindFailure,
		doc: "The app's replay could not read the trace further. The app makes it; it is never in a file.",
		fields: map[string]string{
			"reason": "the read error",
		},
		example: Event{Reason: "read trace: unexpected EOF"},
	}},
	{TraceHeader, info{quiet: true,
		doc: "The first line of a trace file, not an event: see Header."}},
	{TraceClose, info{quiet: true,
		doc: "The last line of a trace file, not an event: see Closing record."}},
}

// catalog finds a type's entry.
var catalog = func() map[Type]info {
	m := make(map[Type]info, len(entries))
	for _, e := range entries {
		m[e.typ] = e.info
	}
	return m
}()

// Types lists every event type of the vocabulary, in the order event.go
// declares them.
func Types() []Type {
	out := make([]Type, len(entries))
	for i, e := range entries {
		out[i] = e.typ
	}
	return out
}

// Known reports whether t is part of the vocabulary.
func (t Type) Known() bool { _, ok := catalog[t]; return ok }

// Kind is the type's group for seeking.
func (t Type) Kind() Kind { return catalog[t].kind }

// Quiet reports whether a readable log leaves the type out: what it tells
// reaches the log through another event (tick text through the turn, for
// example).
func (t Type) Quiet() bool { return catalog[t].quiet }

// fieldDocs is what each key of an event means wherever a type does not
// say more.
var fieldDocs = map[string]string{
	"id":          "the event's number: 1, 2, 3, … in the order events happened, unique across nested pools",
	"parent":      "the id of the event that scopes it: its pool's pool:open",
	"type":        "the event type",
	"t":           "nanoseconds since the runtime started (monotonic clock)",
	"wall":        "the wall-clock time, RFC 3339 with nanoseconds",
	"pool":        "the id of its pool's pool:open",
	"agent":       "the agent's id, unique in the run",
	"parentAgent": "the agent whose tool call spawned this one (a sub-agent)",
	"branch":      "the KV-cache branch (llama.cpp sequence) it concerns",
	"callId":      "the tool call's id",
	"tool":        "the tool's name",
	"text":        "text: a prompt, a task, a turn's output",
	"tokens":      "tokens this event covers",
	"forced":      "per agent id, tokens a grammar forced, written without being sampled (jump-forward decoding)",
	"counts":      "per agent id, the tokens it wrote in the event where more than one",
	"role":        "a name that says which kind of this event it is",
	"args":        "a tool call's arguments",
	"result":      "a result, as JSON",
	"reason":      "why, as a reason code or in words",
	"filled":      "how much of the work is done, in the tool's own units",
	"total":       "how much work there is in all (0: not known)",
	"attempt":     "which run of a call (1 is the first)",
	"retryAfter":  "nanoseconds until the next attempt",
	"duration":    "nanoseconds it took",
	"cellsUsed":   "KV cells in use after the event",
	"nCtx":        "the context's size in cells",
	"unique":      "cells only this agent's branch holds",
	"texts":       "every agent that decoded a token in the tick, keyed by agent id, with its new text (empty while a character is incomplete)",
	"ids":         "the token ids of the span, once per span (what a rerun or a fork rebuilds a branch from)",
	"probs":       "with --trace-logprobs: per agent id, the sampled token's id, log-probability lp and the distribution's entropy h (nats), and with --trace-logprobs=K its K likeliest alternatives",
	"data":        "a JSON payload",
}

// envelope are the keys every event has, whatever its type.
var envelope = []string{"id", "type", "t", "wall"}

// Field is one key of a trace line and what it means.
type Field struct {
	Key     string
	Meaning string
}

// Doc describes one event type for a reader of trace files;
// docs/trace-format.md is generated from Docs.
type Doc struct {
	Type Type
	// Summary says what the event tells.
	Summary string
	// Quiet: the headless log leaves it out.
	Quiet bool
	// Fields are the keys the type fills besides the envelope (its example's
	// and those only some of its events fill), in the order a line has
	// them, each with what it means for this type.
	Fields []Field
	// Example is a typical event of the type, its envelope (id, t, wall)
	// left for the caller to fill. Zero for the file records TraceHeader
	// and TraceClose, which are not events.
	Example Event
}

// Envelope documents the keys every event line has.
func Envelope() []Field {
	out := make([]Field, len(envelope))
	for i, k := range envelope {
		out[i] = Field{Key: k, Meaning: fieldDocs[k]}
	}
	return out
}

// Docs documents every type of the vocabulary, in declaration order.
func Docs() []Doc {
	out := make([]Doc, 0, len(entries))
	for _, e := range entries {
		d := Doc{Type: e.typ, Summary: e.doc, Quiet: e.quiet}
		if e.typ != TraceHeader && e.typ != TraceClose {
			d.Example = e.example
			d.Example.Type = e.typ
			d.Fields = e.fieldsOf(d.Example)
		}
		out = append(out, d)
	}
	return out
}

// fieldsOf lists the keys ex fills besides the envelope, and those the
// entry documents (a key that only some events of the type fill), in the
// order a line has them.
func (e entry) fieldsOf(ex Event) []Field {
	line, err := json.Marshal(ex)
	if err != nil {
		return nil
	}
	var present map[string]json.RawMessage
	if json.Unmarshal(line, &present) != nil {
		return nil
	}
	var out []Field
	rt := reflect.TypeFor[Event]()
	for i := range rt.NumField() {
		key, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		_, shown := present[key]
		_, documented := e.fields[key]
		if !shown && !documented || slices.Contains(envelope, key) {
			continue
		}
		m := e.fields[key]
		if m == "" {
			m = fieldDocs[key]
		}
		out = append(out, Field{Key: key, Meaning: m})
	}
	return out
}

// pplDoc documents the perplexities terminal events carry.
const pplDoc = "ppl: the perplexity of what it sampled under the model's own distribution (e to the mean surprisal of its tokens); samplingPpl: the same under the distribution the sampler drew from (1 under greedy decoding); both absent when the backend cannot say (a server)"
