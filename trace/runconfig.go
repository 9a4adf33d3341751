package trace

// RunConfig is what the person who started a run chose for it, as facts: the
// program, the model, the context and how it samples. `lloyal rerun` and
// `lloyal fork` rebuild the run from these and nothing else, so a trace
// decides what is run again but never with what authority: grants, the
// workspace notes are written to, an inference server and its credentials
// come from the command that reruns it. (The fields after Abilities record
// what authority the run had, so a rerun can say what it does not carry
// over; nothing reads them as permission.)
//
// Fields are what was given: zero (nil) means the run took the harness's
// or lloyal's default, and a rerun leaves them so. Paths are absolute.
type RunConfig struct {
	// Harness is the harness file the run ran; "" for the built-in
	// research harness.
	Harness string `json:"harness,omitempty"`
	// Model is --model: a file's absolute path, or a name as given (an
	// ollama model); "" when the harness or lloyal chose it.
	Model string `json:"model,omitempty"`
	// MMProj is --mmproj, absolute: the model's vision projector.
	MMProj string `json:"mmproj,omitempty"`
	// Corpus is --corpus, absolute.
	Corpus string `json:"corpus,omitempty"`
	// Task is --task.
	Task *string `json:"task,omitempty"`
	// Agents is --agents (absent: the plan's own).
	Agents *int `json:"agents,omitempty"`
	// Context is --ctx.
	Context *int `json:"ctx,omitempty"`
	// Seed is --seed.
	Seed *uint32 `json:"seed,omitempty"`
	// Sampling holds the sampling flags given.
	Sampling SamplingFlags `json:"sampling,omitzero"`
	// Grounded is --grounded.
	Grounded *bool `json:"grounded,omitempty"`
	// Streams is --streams when a count was given (0: one shared cache;
	// nil: auto, the run chose, and the header's context says what).
	Streams *int `json:"streams,omitempty"`
	// Threads and KVType are --threads and --kv-type.
	Threads int    `json:"threads,omitempty"`
	KVType  string `json:"kvType,omitempty"`
	// GPULayers is --gpu-layers (-1 every layer that fits, 0 none; nil:
	// not given, every layer where there is a GPU device).
	GPULayers *int `json:"gpuLayers,omitempty"`
	// Think is --think ("" when not given).
	Think string `json:"think,omitempty"`
	// Template is --template's absolute path, TemplateSHA256 its text's
	// sha256 (a rerun refuses another text).
	Template       string `json:"template,omitempty"`
	TemplateSHA256 string `json:"templateSha256,omitempty"`
	// Logprobs is --trace-logprobs (nil: off).
	Logprobs *int `json:"logprobs,omitempty"`
	// Walk walks the model through the tools (--walk).
	Walk bool `json:"walk,omitempty"`
	// FollowUps are --follow-up's questions; MaxFollowUps --max-follow-ups.
	FollowUps    []string `json:"followUps,omitempty"`
	MaxFollowUps *int     `json:"maxFollowUps,omitempty"`
	// Interactive says follow-ups were typed (--interactive): they are not
	// in the trace, so such a run is not rerun.
	Interactive bool `json:"interactive,omitempty"`
	// Abilities is --ability: installed abilities, loaded again from the
	// rerunning user's own store (signatures checked there).
	Abilities []string `json:"abilities,omitempty"`

	// Granted are the tools the run allowed without asking (--grant);
	// DenyProtected says it refused every other protected call. A rerun
	// says what it does not carry over; it grants only what its own
	// command line does.
	Granted       []string `json:"granted,omitempty"`
	DenyProtected bool     `json:"denyProtected,omitempty"`
	// Workspace is --workspace, absolute: where the run saved notes. A
	// rerun saves them where its own command says.
	Workspace string `json:"workspace,omitempty"`
}

// SamplingFlags are the sampling flags a run was given (nil: not given).
type SamplingFlags struct {
	Temperature   *float32 `json:"temperature,omitempty"`
	TopK          *int     `json:"topK,omitempty"`
	TopP          *float32 `json:"topP,omitempty"`
	MinP          *float32 `json:"minP,omitempty"`
	RepeatPenalty *float32 `json:"repeatPenalty,omitempty"`
	RepeatLastN   *int     `json:"repeatLastN,omitempty"`
}
