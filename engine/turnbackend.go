package engine

// The turn-level backend: a model behind an inference server, which takes a
// whole prompt and streams one turn back. The runtime keeps each branch as
// rendered text (servercells.go) so spines, forks, tool results, pressure and
// recovery work as they do on the cell-level Backend; the server turn loop
// sends a thinking agent's whole conversation as one request (serverloop.go).

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/lloyal-ai/lloyal/engine/chat"
)

// Model is what a Backend (cells and single tokens, a model in this process)
// and a TurnBackend (a turn at a time, a model on a server) have in common:
// New takes the one, NewOnServer the other.
type Model interface {
	Format() chat.Format
	NCtx() int
}

// TurnBackend is a model that works a turn at a time: an inference server
// (vLLM, SGLang, llama-server, ollama). Generate is called from goroutines the
// runtime starts, up to Options.MaxInflight at once, so it must be safe for
// concurrent use.
type TurnBackend interface {
	// Format is the chat format prompts are rendered in (the server's
	// model's template family).
	Format() chat.Format
	// NCtx is the context one request may fill (prompt and answer).
	NCtx() int
	// Generate runs one turn. It calls text with each piece of the answer as
	// it arrives and returns when the turn is over: at the latest after
	// req.MaxTokens pieces or MaxTurnBytes(req.MaxTokens) bytes, with Cut. A transient refusal
	// (the server is busy: 429, 503) is a *RetryError and the turn is sent
	// again after its Delay; any other error ends the agent. Cancelling ctx
	// must abort the request.
	Generate(ctx context.Context, req TurnRequest, text func(string)) (TurnResult, error)
}

// MaxTurnBytes is the most text one turn of maxTokens tokens may bring: 64
// bytes a token and 64 KiB besides, far more than a model writes in that
// many tokens, so only a server streaming past what it was asked for
// reaches it. A TurnBackend passes on no more than this and MaxTokens
// pieces (it cuts the turn there, arguments of a call included), and the
// runtime cuts a turn that brings more: what one turn holds in memory is
// bounded whatever a server streams.
func MaxTurnBytes(maxTokens int) int { return 64<<10 + 64*max(maxTokens, 0) }

// ErrRefused is what a TurnBackend wraps when the server refuses the run
// itself (401, 403: the credentials): every agent would be refused alike,
// so the pool ends them all at once and Run returns the error.
var ErrRefused = errors.New("the server refused the request's credentials")

// ErrBackendFailed is what Run wraps when no agent of a pool ended with a
// result and the backend is why (a server that failed, refused or went
// away; a decode that failed): the run has nothing to go on with, and its
// exit says so.
var ErrBackendFailed = errors.New("the backend failed")

// TurnRequest is one turn to generate.
type TurnRequest struct {
	// Agent is the agent the turn is for (for logs and tests).
	Agent int
	// Prompt is the agent's whole conversation rendered in Format: the spine
	// (byte-identical for every agent of a pool, so the server's prefix cache
	// shares it), the agent's task, and its turns so far, ending with the
	// assistant's generation prompt.
	Prompt string
	// Segments is Prompt as segments (markers and content apart), for servers
	// that can tokenize them separately.
	Segments chat.Prompt
	// MaxTokens caps the answer.
	MaxTokens int
	Sampling  Sampling
	// Call, when set, is the JSON Schema of the one tool call this turn must
	// be ({"name":…, <args key>:{…}}): the server constrains its output to it.
	// The answer may be that JSON alone; the runtime wraps it in the format's
	// call markers.
	Call json.RawMessage
	// Stops end the turn besides the model's end-of-generation tokens.
	Stops []string
	// Tools are the pool's tools, word for word and in the spine's order
	// (the same for every agent, so a server caches them with the system
	// prompt), and ToolChoice what this turn may do: "auto" (text or a
	// call), "required" (a call of any tool) or the name of the one tool
	// it must call. A chat endpoint takes them as tools and tool_choice; a
	// raw-prompt one has the tools in Prompt and the constraint in Call.
	Tools      []chat.ToolSpec
	ToolChoice string
	// Images are the images the pool's tool results have shown so far (a
	// backend that can see: Seer), by the ids the results name them by
	// (ImagesKey): the backend shows each with the result that names it.
	Images []Image
}

// TurnResult is what a turn ended with, as the server reported it.
type TurnResult struct {
	// Cut: the turn stopped at MaxTokens.
	Cut bool
	// PromptTokens is the prompt's length in tokens, and Tokens the answer's
	// (0 when the server did not say).
	PromptTokens, Tokens int
	// Evaluated is how many prompt tokens the server really computed (the
	// rest came from its prefix cache); -1 when it does not say.
	Evaluated int
}
