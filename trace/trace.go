// Package trace writes and reads lloyal's trace files: JSONL, one event per
// line, a header first and a closing record last. The same events feed the
// live UI and the file (event.Event), so a replay is the run as it looked.
//
// The writer is crash-safe in the sense that matters for a text log: lines
// reach the operating system whole and in order, a closing record says how the
// run ended, and a file cut short by a killed process loses at most its last,
// partial line, which readers report.
//
// docs/trace-format.md describes the format, every event type with an
// example line; it is generated from the event catalogue
// (formatdoc_test.go), so it says what this writer writes.
package trace

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// Header is the first line of a trace.
type Header struct {
	Type           event.Type      `json:"type"` // trace:header
	FormatVersion  int             `json:"formatVersion"`
	ProgramVersion string          `json:"programVersion"`
	Model          event.ModelInfo `json:"model"`
	Context        ContextInfo     `json:"context"`
	Sampling       engine.Sampling `json:"sampling"`
	Tools          []ToolInfo      `json:"tools"`
	// Server is the inference server the run drove its model on (absent
	// for a model run here).
	Server *ServerInfo `json:"server,omitempty"`
	Start  time.Time   `json:"start"`
	// CommandLine is the command line as typed (credentials redacted), for
	// people to read: a rerun never parses it (Run is what it reruns).
	CommandLine []string `json:"commandLine"`
	// Run is what the command line chose, as facts a rerun rebuilds the
	// run from (absent in traces older than format 3, which are not rerun).
	Run *RunConfig `json:"run,omitempty"`
	// Abilities are the installed abilities whose tools the run offered.
	Abilities []AbilityInfo `json:"abilities,omitempty"`
	// Services are the run's second models (a harness file's services:),
	// by name.
	Services []ServiceInfo `json:"services,omitempty"`
	// Attachments are the files the person gave the run (--attach, a
	// harness file's attachments:), their bytes kept beside the trace
	// (AttachmentsDir).
	Attachments []AttachmentInfo `json:"attachments,omitempty"`
	// Dir is the working directory the run started in (relative paths of
	// CommandLine are relative to it; Run's paths are absolute, and a
	// rerun does not enter it).
	Dir string `json:"dir,omitempty"`
	// Logprobs is the alternatives each sampled token's probabilities
	// list, when the run traced them (--trace-logprobs; -1: off).
	Logprobs *int `json:"logprobs,omitempty"`
	// Harness is the harness file the run ran (the built-in research
	// harness's as if it were research.yaml in Dir).
	Harness *HarnessRef `json:"harness,omitempty"`
	// RerunOf is the trace this run re-executed (lloyal rerun); ForkOf the
	// trace and event it was forked from (lloyal fork).
	RerunOf string   `json:"rerunOf,omitempty"`
	ForkOf  *ForkRef `json:"forkOf,omitempty"`
}

// HarnessRef is a harness file as a run read it: its path and the sha256
// of its text (with the profiles the run's model needed put over it).
type HarnessRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ForkRef names where a forked run branched off: a trace file and the id
// of the event the fork replaced or extended what came after.
type ForkRef struct {
	Trace string `json:"trace"`
	Event uint64 `json:"event"`
}

// AbilityInfo is an ability as a run loaded it.
type AbilityInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Key is the id of the trusted key that signed it, or "unsigned".
	Key string `json:"key"`
	// Tools are the names of its tools in the run.
	Tools []string `json:"tools"`
}

// ServiceInfo is one service of a run: its name, kind, and where it ran
// (the model file here, or the server's URL and the model's name there).
type ServiceInfo struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Where string `json:"where"`
}

// SignedBy is how an ability's signer reads wherever lloyal names it (an
// install, a run, the app): "signed by KEY", or "unsigned" when key is ""
// or "unsigned" (as a trace header records it).
func SignedBy(key string) string {
	if key == "" || key == "unsigned" {
		return "unsigned"
	}
	return "signed by " + key
}

// AbilitySources says, for each ability tool of the run, which ability it
// comes from: "ability NAME VERSION (signed by KEY)" or "(unsigned)". The
// app shows it with the tool's calls and approval prompts, live and in a
// replay.
func (h *Header) AbilitySources() map[string]string {
	out := map[string]string{}
	for _, a := range h.Abilities {
		for _, t := range a.Tools {
			out[t] = fmt.Sprintf("ability %s %s (%s)", a.Name, plainVersion(a.Version), SignedBy(a.Key))
		}
	}
	return out
}

// PlainVersion reports whether v is an ability's version as installs take
// it: 1 to 64 letters, digits, '.', '+', '_' or '-'. One with spaces and
// brackets would read as "(signed by …)" beside the real signer.
func PlainVersion(v string) bool { return versionRE.MatchString(v) }

// plainVersion is v when it is PlainVersion, else quoted and cut: a
// trace's "1.0 (signed by …)" followed by spaces would read as a signer,
// the real one cut off behind it.
func plainVersion(v string) string {
	if PlainVersion(v) {
		return v
	}
	if len(v) > 64 {
		v = v[:64]
	}
	return strconv.Quote(v)
}

var versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)

// ContextInfo is the llama.cpp context a run used.
type ContextInfo struct {
	NCtx    int `json:"nCtx"`
	NBatch  int `json:"nBatch"`
	NSeqMax int `json:"nSeqMax"`
	// Streams says each of the NSeqMax branches had NCtx/NSeqMax cells of
	// its own (lloyal run --streams) instead of one shared cache.
	Streams bool `json:"streams,omitempty"`
	Threads int  `json:"threads,omitempty"` // most CPU threads llama.cpp decoded with
	// ThreadChoices are the counts each decode chose among by measurement
	// (absent: Threads throughout).
	ThreadChoices []int `json:"threadChoices,omitempty"`
	// KVType is the KV cache's element type (f16, q8_0, q4_0).
	KVType string `json:"kvType,omitempty"`
	// FlashAttn says whether flash attention was on.
	FlashAttn bool `json:"flashAttn,omitempty"`
	// Cache says how the branches' cells were held and what chose it
	// ("auto: a stream per agent: …", "--streams 0", …).
	Cache string `json:"cache,omitempty"`
	// Device is the GPU device that held the model's offloaded layers and
	// their KV cache, as ggml names it ("Vulkan0 (NVIDIA H100)"); absent,
	// the run was on the CPU. Floating-point sums differ between devices,
	// so a rerun is token for token only on the same one.
	Device string `json:"device,omitempty"`
	// GPULayers of Layers (the model's blocks and its output layer) were
	// on Device; the rest ran on the CPU.
	GPULayers int `json:"gpuLayers,omitempty"`
	Layers    int `json:"layers,omitempty"`
	SoftLimit int `json:"softLimit,omitempty"`
	HardLimit int `json:"hardLimit,omitempty"`
	// Projector is the vision projector the model read images with
	// (--mmproj, or its ollama model's), and ProjectorSHA256 its file's
	// sha256: a rerun needs the same file.
	Projector       string `json:"projector,omitempty"`
	ProjectorSHA256 string `json:"projectorSha256,omitempty"`
}

// BranchCells is the most cells one agent's conversation may hold: NCtx,
// or with streams its stream's share.
func (c ContextInfo) BranchCells() int {
	if c.Streams && c.NSeqMax > 0 {
		return c.NCtx / c.NSeqMax
	}
	return c.NCtx
}

// ServerInfo names the inference server of a run: its URL (without
// credentials; the API key is never written) and the model's name there.
type ServerInfo struct {
	URL         string `json:"url"`
	Dialect     string `json:"dialect"` // ollama (/api/generate), openai (/v1/completions) or chat (/v1/chat/completions)
	Model       string `json:"model"`
	MaxInflight int    `json:"maxInflight,omitempty"`
}

// ToolInfo is a tool as the model saw it.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Protected   bool            `json:"protected,omitempty"`
	Fanout      bool            `json:"fanout,omitempty"`
	Terminal    bool            `json:"terminal,omitempty"`
}

// Tools describes tools (and the terminal tool) for a header.
func Tools(tools []engine.Tool, terminal engine.Tool) []ToolInfo {
	var out []ToolInfo
	for _, t := range tools {
		s := t.Spec()
		out = append(out, ToolInfo{Name: s.Name, Description: s.Description, Parameters: s.Parameters, Protected: s.Protected, Fanout: s.Fanout})
	}
	if terminal != nil {
		s := terminal.Spec()
		out = append(out, ToolInfo{Name: s.Name, Description: s.Description, Parameters: s.Parameters, Terminal: true})
	}
	return out
}

// Closing is the last line of a trace: how the run ended.
type Closing struct {
	Type   event.Type `json:"type"`   // trace:close
	Reason string     `json:"reason"` // completed, interrupted, terminated, error: …
	Events uint64     `json:"events"`
	Wall   time.Time  `json:"wall"`
}

// DefaultDir is where runs keep their traces: $XDG_STATE_HOME/lloyal/traces
// (or ~/.local/state/lloyal/traces).
func DefaultDir() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the state dir for traces: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "lloyal", "traces"), nil
}

// NewPath names a new trace file in dir: trace-<time>-<8 hex>.jsonl.
func NewPath(dir string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(dir, fmt.Sprintf("trace-%s-%s.jsonl", time.Now().UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:])))
}
