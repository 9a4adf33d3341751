package harness

import (
	"encoding/json"
	"slices"
)

// File is a harness file as written: `lloyal harness schema` prints the
// JSON Schema it is checked against, and Load fills this from it.
type File struct {
	// Path is where the file was read from; relative paths in it are
	// relative to its folder.
	Path     string          `yaml:"-"`
	Model    Model           `yaml:"model"`
	Sampling Sampling        `yaml:"sampling"`
	Tools    map[string]Tool `yaml:"tools"`
	Roles    map[string]Role `yaml:"roles"`
	Run      Run             `yaml:"run"`
}

// Model is what runs the agents.
type Model struct {
	Path    string `yaml:"path"`
	Server  string `yaml:"server"`
	Context int    `yaml:"context"`
	KVType  string `yaml:"kv_type"`
	Threads int    `yaml:"threads"`
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
}

// Tool is one tool roles may use: a built-in one or a command.
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
}

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
}

// Terminal is the tool a role's agents end with; its arguments are their
// result.
type Terminal struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description"`
	Schema      map[string]any `yaml:"schema"`
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
	Agents      []Agent  `yaml:"agents"`
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
