package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/services"
)

// File is a harness file as written: `lloyal harness schema` prints the
// JSON Schema it is checked against, and Load fills this from it.
type File struct {
	// Path is where the file was read from; relative paths in it are
	// relative to its folder.
	Path string `yaml:"-"`
	// SHA256 is the hex sha256 of the text it was parsed from (with its
	// profiles put over it, the text they made): a rerun checks it.
	SHA256   string          `yaml:"-"`
	Model    Model           `yaml:"model"`
	Sampling Sampling        `yaml:"sampling"`
	Tools    map[string]Tool `yaml:"tools"`
	// Services are the run's second models (a reranker, an embedder, a
	// judge) that its tools read, by name.
	Services map[string]Service `yaml:"services"`
	Roles    map[string]Role    `yaml:"roles"`
	Run      Run                `yaml:"run"`
	// Attachments are files beside the harness file given to every run of
	// it, as --attach gives files (Stage): a read_attachment tool shows
	// them to the model.
	Attachments []string `yaml:"attachments"`
	// Profiles are settings put over the rest when the run's model needs
	// them (ProfileDemo, ProfileWalked, ProfileSmallContext); With applies
	// them.
	Profiles map[string]map[string]any `yaml:"profiles"`
	// doc is the file as decoded YAML, for With.
	doc map[string]any
}

// Profiles a file may hold, each applied when its condition holds.
const (
	ProfileDemo         = "demo"          // lloyal's demo model
	ProfileWalked       = "walked"        // --walk: a model that never calls a tool itself
	ProfileSmallContext = "small_context" // a context under SmallContext tokens
)

// SmallContext is the context size under which ProfileSmallContext
// applies: the engine's, where the policy's sizes live.
const SmallContext = engine.SmallContext

// Profiles are the profiles a run applies: demo on lloyal's demo model,
// walked for a model walked through the tools, small_context in a context
// of nCtx cells under SmallContext.
func Profiles(demo, walked bool, nCtx int) []string {
	var out []string
	for _, p := range []struct {
		on   bool
		name string
	}{{demo, ProfileDemo}, {walked, ProfileWalked}, {nCtx < SmallContext, ProfileSmallContext}} {
		if p.on {
			out = append(out, p.name)
		}
	}
	return out
}

// Model is what runs the agents.
type Model struct {
	Path    string `yaml:"path"`
	Server  string `yaml:"server"`
	Context int    `yaml:"context"`
	KVType  string `yaml:"kv_type"`
	Threads int    `yaml:"threads"`
	// Streams gives each of this many branches context/streams cells of
	// its own (lloyal run --streams).
	Streams int `yaml:"streams"`
	// GPULayers is how many of the model's layers go to the GPU device
	// (lloyal run --gpu-layers; -1 every layer that fits, 0 none); nil
	// leaves the default, every layer where there is a GPU.
	GPULayers *int `yaml:"gpu_layers"`
	// MMProj is the model's vision projector (lloyal run --mmproj), a
	// file relative to the harness file.
	MMProj string `yaml:"mmproj"`
}

// Sampling is the agents' sampling; nil fields keep the runtime's default.
type Sampling struct {
	Temperature   *float32 `yaml:"temperature"`
	TopK          *int     `yaml:"top_k"`
	TopP          *float32 `yaml:"top_p"`
	MinP          *float32 `yaml:"min_p"`
	RepeatPenalty *float32 `yaml:"repeat_penalty"`
	RepeatLastN   *int     `yaml:"repeat_last_n"`
	Seed          *uint32  `yaml:"seed"`
	// JumpForward off samples grammar-forced text one token per tick
	// (engine.Sampling.JumpForward; on by default).
	JumpForward *bool `yaml:"jump_forward"`
}

// Tool is one tool roles may use: a built-in one (Builtin names its kind,
// kinds.go), a command, a delegate to another role or an ability's tools.
type Tool struct {
	Builtin     string         `yaml:"builtin"`
	Corpus      string         `yaml:"corpus"`
	Folder      string         `yaml:"folder"`
	Command     []string       `yaml:"command"`
	Delegate    string         `yaml:"delegate"`
	Ability     string         `yaml:"ability"`
	MaxTasks    int            `yaml:"max_tasks"`
	Description string         `yaml:"description"`
	Parameters  map[string]any `yaml:"parameters"`
	ReadOnly    bool           `yaml:"read_only"`
	Timeout     string         `yaml:"timeout"`
	Env         []string       `yaml:"env"`
	// Narrow narrows the model's arguments by grammar (NarrowQuestion,
	// NarrowHits, NarrowSubQuestions).
	Narrow string `yaml:"narrow"`
	// Guards are the named guards on the tool (engine.NamedGuard:
	// same-FIELD, sibling-FIELD), in place of its built-in kind's default
	// ones (search: same-query); an empty list turns them all off.
	Guards []string `yaml:"guards"`
	// Rerank names the service (of kind rerank) that scores a search's
	// candidates: the search becomes a funnel (tools.RankedSearchTool).
	Rerank string `yaml:"rerank"`
}

// Service is a second model a tool reads (services.Spec): a model file
// loaded here beside the run's, or a server's endpoint.
type Service struct {
	Kind        string   `yaml:"kind"`
	Model       string   `yaml:"model"`
	Server      string   `yaml:"server"`
	Labels      []string `yaml:"labels"`
	Instruction string   `yaml:"instruction"`
	Context     int      `yaml:"context"`
	Threads     int      `yaml:"threads"`
	GPULayers   *int     `yaml:"gpu_layers"`
}

// How a best_of role keeps a candidate.
const (
	PickPerplexity = "perplexity"
	PickJudge      = "judge"
)

// Narrowings a built-in tool may have.
const (
	NarrowQuestion     = "question"      // search: the agent's question or a clause of it
	NarrowHits         = "hits"          // read_file: a passage a search showed the agent
	NarrowSubQuestions = "sub_questions" // delegate: clauses and glossary terms
	NarrowClauses      = "clauses"       // a plan terminal: the task's clauses
)

// AllAbilities, as a tool's ability, is every ability the run loads.
const AllAbilities = "*"

// Role is what an agent is: its prompt, tools, terminal tool and limits.
type Role struct {
	System         string   `yaml:"system"`
	SystemFile     string   `yaml:"system_file"`
	Tools          []string `yaml:"tools"`
	Terminal       Terminal `yaml:"terminal"`
	MaxTurns       int      `yaml:"max_turns"`
	TurnTokens     int      `yaml:"turn_tokens"`
	TimeSoft       string   `yaml:"time_soft"`
	TimeHard       string   `yaml:"time_hard"`
	Pressure       Pressure `yaml:"pressure"`
	RecoveryPrompt string   `yaml:"recovery_prompt"`
	ToolChoice     string   `yaml:"tool_choice"`
	Walk           []string `yaml:"walk"`
	// WalkFirst walks the first agent of each step of the role alone.
	WalkFirst []string `yaml:"walk_first"`
	// Policy names the agent policy (PolicyDefault, PolicySkipIdle);
	// MinToolCalls and RefuseFreeText are the pool's return rules.
	Policy         string `yaml:"policy"`
	MinToolCalls   int    `yaml:"min_tool_calls"`
	RefuseFreeText bool   `yaml:"refuse_free_text"`
	// BestOf runs this many candidates of each of the role's agents in a
	// parallel step, forked from the same point and decoded together, and
	// keeps one (Pick): engine.BestOf.
	BestOf int `yaml:"best_of"`
	// Pick is how: PickPerplexity (the default: the lowest) or PickJudge
	// (the judge service Judge names, by its first label's probability).
	Pick  string `yaml:"pick"`
	Judge string `yaml:"judge"`
}

// Named agent policies a role may pick.
const (
	PolicyDefault = "default"
	// PolicySkipIdle: an agent stopped before it made a tool call or
	// wrote 32 tokens fails without a recovery report.
	PolicySkipIdle = "skip_idle_recovery"
)

// Terminal is the tool a role's agents end with; its arguments are their
// result.
type Terminal struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Schema      map[string]any `yaml:"schema"`
	// Builtin is one of lloyal's terminal tools (TerminalPlan,
	// TerminalReport, TerminalPublish) instead of Name and Schema.
	Builtin      string `yaml:"builtin"`
	MaxQuestions int    `yaml:"max_questions"` // plan
	Narrow       string `yaml:"narrow"`        // plan: NarrowClauses
	Grounded     bool   `yaml:"grounded"`      // report, publish
	QuoteOnly    bool   `yaml:"quote_only"`    // report, publish
	From         string `yaml:"from"`          // publish: the findings' step
}

// Built-in terminal tools.
const (
	TerminalPlan    = "plan"
	TerminalReport  = "report"
	TerminalPublish = "publish"
)

// DefaultQuestions is the most questions of a plan terminal whose
// max_questions does not say, unless Options.Questions (--agents) does.
const DefaultQuestions = 3

// name is the terminal tool's name: its own, or its builtin's (a publish
// terminal is its agent's report).
func (t Terminal) name() string {
	if t.Name != "" {
		return t.Name
	}
	if k, ok := terminalKindOf(t.Builtin); ok && k.tool != "" {
		return k.tool
	}
	return t.Builtin
}

// Pressure is a role's context limits, in free cells.
type Pressure struct {
	Soft int `yaml:"soft"`
	Hard int `yaml:"hard"`
}

// Run is the program: its steps, in order.
type Run struct {
	Input string `yaml:"input"`
	Steps []Step `yaml:"steps"`
	// FollowUp is the role that answers follow-ups ("": the last step's).
	FollowUp string `yaml:"follow_up"`
}

// Orchestrations a step may use.
const (
	Parallel     = "parallel"
	Chain        = "chain"
	DAG          = "dag"
	AsRoomAllows = "as_room_allows"
)

// Step is one pool of agents of one role.
type Step struct {
	ID          string   `yaml:"id"`
	Role        string   `yaml:"role"`
	Orchestrate string   `yaml:"orchestrate"`
	Task        string   `yaml:"task"`
	Tasks       []string `yaml:"tasks"`
	EachFile    string   `yaml:"each_file"`
	EachItem    string   `yaml:"each_item"`
	Agents      []Agent  `yaml:"agents"`
	// Prompt takes the step's one task from an MCP server's prompt (an
	// ability the file's tools name), got when the step starts.
	Prompt *StepPrompt `yaml:"prompt"`
}

// StepPrompt is an ability's MCP prompt as a step's task: its name and
// arguments ({{input}} and earlier steps' results filled in first).
type StepPrompt struct {
	Ability   string            `yaml:"ability"`
	Name      string            `yaml:"name"`
	Arguments map[string]string `yaml:"arguments"`
}

// Agent is a DAG step's node.
type Agent struct {
	ID   string   `yaml:"id"`
	Task string   `yaml:"task"`
	Deps []string `yaml:"deps"`
}

// mustJSON is v (decoded YAML) as JSON.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// Abilities are the installed abilities the file's tools name, each once.
func (f *File) Abilities() []string {
	var out []string
	for _, name := range sortedKeys(f.Tools) {
		if a := f.Tools[name].Ability; a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// CallsTools says whether any role has tools besides its terminal: its
// agents then hold conversations, each result appended to its branch.
func (f *File) CallsTools() bool {
	for _, r := range f.Roles {
		if len(r.Tools) > 0 {
			return true
		}
	}
	return false
}

// With is f with the named profiles put over it, in order; a name the file
// has no profile for is passed over. Maps merge key by key; any other
// value (a list, a string) replaces the file's.
func (f *File) With(names ...string) (*File, error) {
	doc := map[string]any{}
	for k, v := range f.doc {
		if k != "profiles" {
			doc[k] = v
		}
	}
	var applied []string
	for _, n := range names {
		if p, ok := f.Profiles[n]; ok {
			doc = merge(doc, p)
			applied = append(applied, n)
		}
	}
	if len(applied) == 0 {
		return f, nil
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: profiles %s: %w", f.Path, strings.Join(applied, ", "), err)
	}
	g, err := Parse(f.Path, data)
	if err != nil {
		return nil, fmt.Errorf("%s with profiles %s: %w", f.Path, strings.Join(applied, ", "), err)
	}
	return g, nil
}

// merge is over put on base: maps key by key, other values replaced.
// Neither is changed.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		b, bok := out[k].(map[string]any)
		o, ook := v.(map[string]any)
		if bok && ook {
			out[k] = merge(b, o)
		} else {
			out[k] = v
		}
	}
	return out
}

// Origin is the origin (engine.ToolSpec.Origin) of the file's tool name:
// the file's absolute path and the sha256 of the tool's definition as the
// run uses it (its profiles put over it), so that a grant for it is a
// grant for this definition in this file only: another harness's tool of
// the same name, or this one once changed, asks again.
func (f *File) Origin(name string) string {
	def, _ := json.Marshal(struct {
		Name string
		Tool Tool
	}{name, f.Tools[name]})
	sum := sha256.Sum256(def)
	return fmt.Sprintf("harness %s sha256:%s", f.Path, hex.EncodeToString(sum[:]))
}

// ServiceSpecs are the file's services as services.Open takes them, sorted
// by name: a model file here is relative to the file (an ollama name is
// left as it is).
func (f *File) ServiceSpecs() []services.Spec {
	var out []services.Spec
	for _, name := range sortedKeys(f.Services) {
		s := f.Services[name]
		model := s.Model
		if _, err := os.Stat(f.Rel(model)); s.Server == "" && (err == nil || strings.HasSuffix(model, ".gguf")) {
			model = f.Rel(model)
		}
		out = append(out, services.Spec{Name: name, Kind: services.Kind(s.Kind), Model: model, Server: s.Server, Labels: s.Labels,
			Instruction: s.Instruction, Context: s.Context, Threads: s.Threads, GPULayers: s.GPULayers})
	}
	return out
}
