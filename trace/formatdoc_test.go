package trace

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

var update = flag.Bool("update", false, "rewrite docs/trace-format.md from the event catalogue")

const (
	formatDoc       = "../docs/trace-format.md"
	formatDocUpdate = "go test ./trace -run TestTraceFormatDoc -update"
)

// exampleStart is when the example run starts: any fixed time, so the
// document comes out the same on every run.
var exampleStart = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// exampleHeader fills every key a header can have (a real run leaves some
// out: server for a model run here, model.path for a server run).
func exampleHeader() Header {
	return Header{ProgramVersion: "v0.9.0",
		Model: event.ModelInfo{Ref: "qwen3:0.6b", Path: "/home/me/.ollama/models/blobs/sha256-7f4030143c1c", Name: "Qwen3 0.6B", Size: 522653696,
			SHA256First: "9c1ba4a5e1d2c3b4a5968778695a4b3c2d1e0f9e8d7c6b5a49382716a5b4c3d2", SHA256: "7f4030143c1c5e6d7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1", OllamaDigest: "sha256:7f4030143c1c",
			Architecture: "qwen3", NCtxTrain: 40960, NVocab: 151936, NParams: 596049920, Format: "qwen3"},
		Context: ContextInfo{NCtx: 8192, NBatch: 512, NSeqMax: 64, Threads: 4, ThreadChoices: []int{2, 4}, KVType: "q8_0", FlashAttn: true,
			Cache: "--streams 4", Device: "Vulkan0 (NVIDIA GeForce RTX 4090)", GPULayers: 29, Layers: 29, SoftLimit: 1024, HardLimit: 512,
			Projector: "/home/me/models/llava-1.5-7b.mmproj.gguf", ProjectorSHA256: "3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d"},
		Sampling: engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 7,
			Grammar: &chat.Grammar{GBNF: `root ::= "<tool_call>" call-json`, Lazy: true, TriggerWords: []string{"<tool_call>"}, TriggerPatterns: []string{`\s*\{`}}},
		Tools: []ToolInfo{
			{Name: "search", Description: "Search the notes.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`), Fanout: true},
			{Name: "write_note", Description: "Write a note to the notes folder.", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`), Protected: true},
			{Name: "report", Description: "Report.", Parameters: json.RawMessage(`{"type":"object","properties":{"result":{"type":"string"}},"required":["result"]}`), Terminal: true},
		},
		Server:      &ServerInfo{URL: "http://127.0.0.1:11434", Dialect: "ollama", Model: "qwen3:0.6b", MaxInflight: 4},
		Start:       exampleStart,
		CommandLine: []string{"lloyal", "run", "review.yaml", "--seed", "7", "--task", "When did the bridge open?", "--grant", "write_note"},
		Run: &RunConfig{Harness: "/home/me/research/review.yaml", Model: "/home/me/models/qwen3-0.6b.gguf", MMProj: "/home/me/models/llava-1.5-7b.mmproj.gguf", Corpus: "/home/me/research/docs", Task: &task, Agents: &four,
			Context: &ctx8k, Seed: &seven, Sampling: SamplingFlags{Temperature: &temp, TopK: &forty, TopP: &topP, MinP: &minP, RepeatPenalty: &penalty, RepeatLastN: &lastN},
			Grounded: &yes, Streams: &four, Threads: 2, KVType: "q8_0", GPULayers: &all, Think: "off", Template: "/home/me/research/chat.jinja",
			TemplateSHA256: "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0", Logprobs: &five, Walk: true,
			FollowUps: []string{"And who built it?"}, MaxFollowUps: &eight, Interactive: true, Abilities: []string{"notes"},
			Granted: []string{"write_note"}, DenyProtected: true, Workspace: "/home/me/research/notes"},
		Abilities:   []AbilityInfo{{Name: "notes", Version: "1.2.0", Key: "a1b2c3d4", Tools: []string{"write_note"}}},
		Services:    []ServiceInfo{{Name: "ranker", Kind: "rerank", Where: "/home/me/models/qwen3-reranker-0.6b.gguf"}},
		Attachments: []AttachmentInfo{{Name: "bridge.png", MIMEType: "image/png", Size: 48213, SHA256: "5d41402abc4b2a76b9719d911017c592aa0c2d1e0f9e8d7c6b5a49382716a5b4"}},
		Dir:         "/home/me/research",
		Logprobs:    &five,
		Harness:     &HarnessRef{Path: "/home/me/research/review.yaml", SHA256: "0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e"},
		RerunOf:     "/home/me/.local/state/lloyal/traces/trace-20250601T115500Z-1a2b3c4d.jsonl",
		ForkOf:      &ForkRef{Trace: "/home/me/.local/state/lloyal/traces/trace-20250601T115500Z-1a2b3c4d.jsonl", Event: 122},
	}
}

var (
	five, forty, lastN               = 5, 40, 64
	four, eight, ctx8k, all          = 4, 8, 8192, -1
	seven                     uint32 = 7
	temp, topP, minP, penalty        = float32(0.7), float32(0.95), float32(0.05), float32(1.1)
	yes                              = true
	task                             = "When did the bridge open?"
)

// headerDocs says what each key of the header and the closing record
// means, by path ("sampling.grammar.gbnf", "tools[].name").
var headerDocs = map[string]string{
	"type":                             "trace:header",
	"formatVersion":                    "the file layout's version (see Versions)",
	"programVersion":                   "the lloyal version that wrote the file",
	"model":                            "the model the run used",
	"model.ref":                        "the model as the user named it: a path, an ollama name, a server's model",
	"model.path":                       "the GGUF file",
	"model.name":                       "the model's name from its metadata",
	"model.size":                       "the file's size in bytes",
	"model.sha256FirstMiB":             "SHA-256 of the file's first MiB, hex",
	"model.ollamaDigest":               "the blob's digest, for a model from ollama's store",
	"model.architecture":               "the architecture llama.cpp read",
	"model.nCtxTrain":                  "the context length the model was trained with",
	"model.nVocab":                     "the vocabulary's size",
	"model.nParams":                    "the number of parameters",
	"model.chatFormat":                 "the chat format lloyal renders prompts and parses calls in",
	"context":                          "the context the agents share (a server run has nCtx only)",
	"context.nCtx":                     "its size in cells (tokens)",
	"context.nBatch":                   "the most tokens one decode takes",
	"context.nSeqMax":                  "the most branches (llama.cpp sequences) at once",
	"context.threads":                  "the most CPU threads a decode used",
	"context.threadChoices":            "the thread counts decodes chose among by measurement (absent: threads throughout)",
	"context.kvType":                   "the KV cache's element type: f16, q8_0 or q4_0",
	"context.flashAttn":                "whether flash attention was on",
	"context.cache":                    "how the branches' cells were held and what chose it: --streams N, the harness file, or auto and why (a stream per agent, or one shared cache)",
	"context.device":                   "the GPU device that held the offloaded layers and their KV cache, as ggml names it (absent: the CPU); another device's sums differ, so a rerun matches token for token only on the same one",
	"context.gpuLayers":                "how many of the model's layers were on that device (the rest ran on the CPU)",
	"context.layers":                   "the model's layers, its output layer counted (llama.cpp's count for offloading)",
	"context.softLimit":                "the pressure soft limit in cells: with less room free, no new work starts and agents are asked to report",
	"context.hardLimit":                "the pressure hard limit in cells: the reserve recovery reports are written into",
	"context.projector":                "the vision projector the model read images with (--mmproj, or the one its ollama model carries)",
	"context.projectorSha256":          "SHA-256 of the projector file: a rerun needs the same",
	"sampling":                         "the sampler every agent starts from",
	"sampling.temperature":             "the temperature (0: greedy sampling)",
	"sampling.topK":                    "top-k (0: off)",
	"sampling.topP":                    "top-p (0: off)",
	"sampling.minP":                    "min-p (0: off)",
	"sampling.repeatPenalty":           "the repetition penalty over each turn's last repeatLastN tokens (absent: off)",
	"sampling.repeatLastN":             "how many of a turn's last tokens the penalty looks at (absent: 64)",
	"sampling.seed":                    "the base seed: each agent samples with a seed derived from it",
	"sampling.grammar":                 "a grammar every turn starts under (absent: none; agents' call grammars are not recorded)",
	"sampling.grammar.gbnf":            "the grammar, GBNF",
	"sampling.grammar.lazy":            "whether it waits for a trigger",
	"sampling.grammar.triggerWords":    "words that arm a lazy grammar",
	"sampling.grammar.triggerPatterns": "regular expressions that arm a lazy grammar",
	"tools":                            "the tools the model was offered, the terminal tool last",
	"run":                              "what the command line chose, as facts: lloyal rerun and fork rebuild the run from these, never its authority (absent before format 3): grants, the notes folder, the folder searched, the harness file run (its sha256 checked) and abilities come from the rerunning command and the user's store, the model and projector loaded are the files the header names and whose sha256 is checked. Unset keys took the harness's or lloyal's default. Paths are absolute",
	"run.harness":                      "the harness file (absent: the built-in research harness)",
	"run.model":                        "--model: a file's path, or a name as given (a rerun loads `model.path`, the file it checks)",
	"run.mmproj":                       "--mmproj: the vision projector's absolute path",
	"run.corpus":                       "--corpus: shown by a rerun, never read (a run that searched a folder is rerun with `--corpus`)",
	"run.task":                         "--task",
	"run.agents":                       "--agents",
	"run.ctx":                          "--ctx",
	"run.seed":                         "--seed",
	"run.sampling":                     "the sampling flags given",
	"run.sampling.temperature":         "--temperature",
	"run.sampling.topK":                "--top-k",
	"run.sampling.topP":                "--top-p",
	"run.sampling.minP":                "--min-p",
	"run.sampling.repeatPenalty":       "--repeat-penalty",
	"run.sampling.repeatLastN":         "--repeat-last-n",
	"run.grounded":                     "--grounded",
	"run.streams":                      "--streams when a count was given (0: one shared cache; absent: auto, and context.cache says what the run chose)",
	"run.threads":                      "--threads",
	"run.kvType":                       "--kv-type",
	"run.gpuLayers":                    "--gpu-layers (-1: every layer that fits; absent: not given)",
	"run.think":                        "--think",
	"run.template":                     "--template",
	"run.templateSha256":               "SHA-256 of the template's text, hex (a rerun refuses another text)",
	"run.logprobs":                     "--trace-logprobs",
	"run.walk":                         "--walk",
	"run.followUps":                    "--follow-up's questions",
	"run.maxFollowUps":                 "--max-follow-ups",
	"run.interactive":                  "--interactive (its typed follow-ups are not in the trace: not rerun)",
	"run.abilities":                    "--ability: abilities a rerun starts from its user's own store, only those enabled there",
	"run.granted":                      "--grant: tools the run allowed without asking. Recorded to be shown, never used: a rerun grants only what its own command line does",
	"run.denyProtected":                "--deny-protected",
	"run.workspace":                    "--workspace: where the run saved notes. Shown, never used: a rerun saves notes where its own command says",
	"tools[].name":                     "the tool's name",
	"tools[].description":              "its description, as the model read it",
	"tools[].parameters":               "its arguments' JSON Schema",
	"tools[].protected":                "a call waits for a person's approval",
	"tools[].fanout":                   "calls run concurrently, off the tick loop",
	"tools[].terminal":                 "the tool that ends an agent with its report",
	"server":                           "the inference server the run drove its model on (absent for a model run here)",
	"server.url":                       "its URL, without credentials (an API key is never written)",
	"server.dialect":                   "its API: ollama (/api/generate), openai (/v1/completions) or chat (/v1/chat/completions)",
	"server.model":                     "the model's name there",
	"server.maxInflight":               "the most requests the run kept in flight",
	"start":                            "when the run started, RFC 3339",
	"commandLine":                      "the command line, credentials removed from URLs",
	"model.sha256":                     "SHA-256 of the whole file, hex (lloyal rerun checks it; an ollama blob's is its digest)",
	"dir":                              "the working directory the run started in: the command line's relative paths are relative to it",
	"logprobs":                         "with --trace-logprobs: the alternatives each token's probabilities list (absent: off)",
	"harness":                          "the harness file the run ran (the built-in research harness as research.yaml in dir)",
	"harness.path":                     "its path",
	"harness.sha256":                   "SHA-256 of its text, with the profiles the model needed put over it (lloyal rerun checks it)",
	"rerunOf":                          "the trace this run re-executed (lloyal rerun)",
	"forkOf":                           "where this run was forked (lloyal fork, F in a replay)",
	"forkOf.trace":                     "the trace it was forked from",
	"forkOf.event":                     "the event it was forked at: what that agent read there was edited",
	"abilities":                        "the installed abilities whose tools the run offered",
	"abilities[].name":                 "the ability's name",
	"abilities[].version":              "its version",
	"abilities[].key":                  "the id of the trusted key that signed it, or unsigned",
	"abilities[].tools":                "its tools in the run",
	"services":                         "the harness file's services: second models its tools read (docs/services.md)",
	"services[].name":                  "the service's name in the harness file",
	"services[].kind":                  "rerank, embed or judge",
	"services[].where":                 "the model file it ran here, or the server's URL and the model's name there",
	"attachments":                      "the files the person gave the run (`--attach`, a harness file's `attachments:`); each one's bytes are kept beside the trace, in the folder named like it with `.attachments` for `.jsonl` (`run.jsonl`: `run.attachments/SHA256`), which a rerun reads them from",
	"attachments[].name":               "the file's base name, which the model asks for it by",
	"attachments[].mimeType":           "its type, read from its bytes (a text file's from its extension)",
	"attachments[].size":               "its size in bytes",
	"attachments[].sha256":             "SHA-256 of its bytes: the name of its copy beside the trace",
}

var closingDocs = map[string]string{
	"type":   "trace:close",
	"reason": "how the run ended: completed, interrupted, terminated, error: …",
	"events": "how many events the writer was given (the file has this many event lines when no write failed)",
	"wall":   "when the file was closed, RFC 3339",
}

// exampleTrace writes the example header, every event type's example and a
// closing record through the Writer, and returns the file's lines: the
// header first, the closing record last.
func exampleTrace(t *testing.T) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "example.jsonl")
	w, err := Create(path, exampleHeader())
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	for _, d := range event.Docs() {
		if d.Example.Type != "" { // the header and the closing record are not events
			evs = append(evs, d.Example)
		}
	}
	// Number the examples as one run would: the tool:dispatch example gets
	// the id its call's events name as their parent.
	var dispatch, callParent uint64
	for i, e := range evs {
		switch e.Type {
		case event.ToolDispatch:
			dispatch = uint64(i)
		case event.ToolResult:
			callParent = e.Parent
		}
	}
	first := uint64(1)
	if callParent > dispatch {
		first = callParent - dispatch
	}
	for i, e := range evs {
		e.ID = first + uint64(i)
		e.At = time.Duration(e.ID) * 1500 * time.Microsecond
		e.Wall = exampleStart.Add(e.At)
		w.Emit(e)
	}
	w.now = func() time.Time { return exampleStart.Add(time.Minute) }
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// member is one key of an object, in the order the line has it.
type member struct {
	key   string
	value json.RawMessage
}

// members lists an object's keys in order (nil for anything else).
func members(raw json.RawMessage) []member {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []member
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return out
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		out = append(out, member{k.(string), v})
	}
	return out
}

// kind is a value's JSON type, as a reader of the document needs it.
func kind(raw json.RawMessage) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		var elems []json.RawMessage
		_ = json.Unmarshal(raw, &elems)
		if len(elems) == 0 {
			return "array"
		}
		return "array of " + kind(elems[0])
	}
	return "?"
}

// key is one key of a line, by its path from the line's top.
type key struct {
	path, name, kind string
}

// walk lists the keys of an object line, nested ones included, in order;
// the keys of an array's objects are merged under "name[]". It does not
// descend into values content says are someone else's JSON.
func walk(prefix string, raw json.RawMessage, content func(path string) bool, seen map[string]bool, out *[]key) {
	for _, m := range members(raw) {
		path := prefix + m.key
		if !seen[path] {
			seen[path] = true
			*out = append(*out, key{path, m.key, kind(m.value)})
		}
		if content(path) {
			continue
		}
		walk(path+".", m.value, content, seen, out)
		var elems []json.RawMessage
		if json.Unmarshal(m.value, &elems) == nil {
			for _, e := range elems {
				walk(path+"[].", e, content, seen, out)
			}
		}
	}
}

// keysOf lists every key of a line.
func keysOf(line string, content func(path string) bool) []key {
	var out []key
	walk("", json.RawMessage(line), content, map[string]bool{}, &out)
	return out
}

// contentOf says which values of a line of type typ are content: JSON a
// model or a tool wrote (arguments, results, schemas, a tool's note) or
// agent ids keying text, whose keys are theirs and not the trace's.
func contentOf(typ string) func(path string) bool {
	return func(path string) bool {
		last := path[strings.LastIndex(path, ".")+1:]
		switch strings.TrimSuffix(last, "[]") {
		case "args", "result", "parameters", "texts":
			return true
		}
		return typ == string(event.ToolNote) && path == "data"
	}
}

func lineType(t *testing.T, line string) string {
	t.Helper()
	var p probe
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return string(p.Type)
}

var camel = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// Every key the writer writes is camelCase: the header's (nested objects
// filled), every event type's, the closing record's, and those of a real
// run on the scripted double (the engine's data payloads).
func TestTraceKeysAreCamelCase(t *testing.T) {
	lines := exampleTrace(t)
	real := filepath.Join(t.TempDir(), "run.jsonl")
	recordRun(t, real)
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
	for _, line := range lines {
		typ := lineType(t, line)
		for _, k := range keysOf(line, contentOf(typ)) {
			if !camel.MatchString(k.name) {
				t.Errorf("%s: key %q (at %s) is not camelCase", typ, k.name, k.path)
			}
		}
	}
}

// The catalogue documents every key a real event has: a run on the
// scripted double fills no key its type's entry does not list.
func TestTheCatalogueCoversARealRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	recordRun(t, path)
	documented := map[event.Type]map[string]bool{}
	for _, d := range event.Docs() {
		documented[d.Type] = map[string]bool{}
		for _, f := range d.Fields {
			documented[d.Type][f.Key] = true
		}
		for _, f := range event.Envelope() {
			documented[d.Type][f.Key] = true
		}
	}
	reported := map[string]bool{}
	_, _, err := Follow(t.Context(), path, false, func(e event.Event) error {
		line, _ := json.Marshal(e)
		for _, m := range members(line) {
			if !documented[e.Type][m.key] && !reported[string(e.Type)+" "+m.key] {
				reported[string(e.Type)+" "+m.key] = true
				t.Errorf("%s fills %q, which the catalogue (engine/event/catalog.go) does not document for it", e.Type, m.key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// formatDocText is docs/trace-format.md: the layout, the versions, and
// every event type of the catalogue with its keys and the writer's
// encoding of its example.
func formatDocText(t *testing.T) string {
	lines := exampleTrace(t)
	header, closing := lines[0], lines[len(lines)-1]
	eventLines := map[string]string{}
	for _, l := range lines[1 : len(lines)-1] {
		eventLines[lineType(t, l)] = l
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Trace format\n\n")
	p("<!-- Generated from the event catalogue (engine/event/catalog.go) and trace/formatdoc_test.go by\n")
	p("     %s\n", formatDocUpdate)
	p("     Do not edit: TestTraceFormatDoc fails when this file and the catalogue differ. -->\n\n")
	p("Every run writes a trace: a [JSON Lines](https://jsonlines.org) file, one JSON object per line, ")
	p("named `trace-<UTC time>-<8 hex>.jsonl` in `$XDG_STATE_HOME/lloyal/traces` (or `~/.local/state/lloyal/traces`). ")
	p("The events in it are the ones the app shows live, so `lloyal replay` plays the run as it looked. ")
	p("`lloyal trace check FILE` validates every line, `lloyal trace stats FILE` summarises the run, ")
	p("`lloyal replay FILE` (or `--headless`) plays it back; in Go, package `trace` reads and writes it.\n\n")

	p("## Layout\n\n")
	p("1. **The header**, the first line (`\"type\":\"trace:header\"`): what ran, on what, with which settings.\n")
	p("2. **Events**, one a line, in the order they happened (`id` 1, 2, 3, …).\n")
	p("3. **The closing record**, the last line (`\"type\":\"trace:close\"`): how the run ended.\n\n")
	p("Lines reach the file whole and in order. A run that was killed leaves no closing record and at most a partial last line; ")
	p("readers report it (`trace check` names its line) and read everything before it. ")
	p("A reader skips a line it cannot read, says which and why, and reads on.\n\n")
	p("Keys are camelCase. The values of `args`, `result`, `texts`, a tool's `parameters` and a `tool:note`'s `data` are the model's or a tool's own JSON: their keys are theirs. ")
	p("Event keys whose value is zero (0, \"\", false, empty) are left out. ")
	p("Durations are integers of nanoseconds; times are RFC 3339 strings.\n\n")

	p("## Versions\n\n")
	p("The header's `formatVersion` is the layout's version; this lloyal writes %d and reads every version up to it. ", FormatVersion)
	p("It refuses a newer one (\"update lloyal\").\n\n")
	p("| formatVersion | what changed |\n|---|---|\n")
	p("| 1 | the first layout. The header's `sampling` object had Go field names (`Temperature`, `TopK`, `TopP`, `MinP`, `Seed`, `Grammar` with `GBNF`, `Lazy`, `TriggerWords`, `TriggerPatterns`) and three `context` keys were snake_case (`thread_choices`, `kv_type`, `flash_attn`). |\n")
	p("| 2 | every key is camelCase: those keys are now `temperature`, `topK`, `topP`, `minP`, `seed`, `grammar` (`gbnf`, `lazy`, `triggerWords`, `triggerPatterns`; left out when there is none), `threadChoices`, `kvType`, `flashAttn`. Events and the closing record are unchanged. |\n")
	p("| 3 | the header gains `run`, the run's configuration as facts. `lloyal rerun` and `lloyal fork` rebuild a run from it alone and refuse older traces (they would have had to re-parse `commandLine`, grants and server included). Nothing else changed: every reader reads versions 1 and 2 as before. |\n\n")

	p("## Header\n\n")
	keyTable(t, &b, keysOf(header, contentOf(string(event.TraceHeader))), headerDocs)
	p("\n```json\n%s\n```\n\n", header)
	p("## Closing record\n\n")
	keyTable(t, &b, keysOf(closing, contentOf(string(event.TraceClose))), closingDocs)
	p("\n```json\n%s\n```\n\n", closing)

	p("## Events\n\n")
	p("Every event line has these keys:\n\n")
	p("| key | JSON type | meaning |\n|---|---|---|\n")
	for _, f := range event.Envelope() {
		p("| `%s` | %s | %s |\n", f.Key, eventKeyKind(f.Key, ""), f.Meaning)
	}
	p("\nThe other keys depend on the type. A type's table lists every key its events may have; its example shows a typical one. ")
	p("\"Left out of the headless log\" types still reach the app and `trace stats`.\n\n")
	p("| type | what it says |\n|---|---|\n")
	for _, d := range event.Docs() {
		p("| [`%s`](#%s) | %s |\n", d.Type, anchor(d.Type), firstSentence(d.Summary))
	}
	for _, d := range event.Docs() {
		p("\n### %s\n\n%s", d.Type, d.Summary)
		if d.Example.Type == "" {
			p("\n")
			continue
		}
		if d.Quiet {
			p(" Left out of the headless log.")
		}
		p("\n\n")
		line := eventLines[string(d.Type)]
		if line == "" {
			t.Fatalf("no example line for %s", d.Type)
		}
		if len(d.Fields) > 0 {
			p("| key | JSON type | meaning |\n|---|---|---|\n")
			for _, f := range d.Fields {
				p("| `%s` | %s | %s |\n", f.Key, eventKeyKind(f.Key, line), f.Meaning)
			}
			p("\n")
		}
		p("```json\n%s\n```\n", line)
	}
	return b.String()
}

// keyTable prints a table of keys with their meanings from docs; a key
// without one (or a meaning without a key) fails the test.
func keyTable(t *testing.T, b *strings.Builder, keys []key, docs map[string]string) {
	t.Helper()
	fmt.Fprintf(b, "| key | JSON type | meaning |\n|---|---|---|\n")
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.path] = true
		m := docs[k.path]
		if m == "" {
			t.Errorf("key %s has no meaning: add it to trace/formatdoc_test.go", k.path)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", k.path, k.kind, m)
	}
	for path := range docs {
		if !seen[path] {
			t.Errorf("trace/formatdoc_test.go documents %s, which the example does not have", path)
		}
	}
}

// eventKeyKind is a key's JSON type: its value's in line when line has
// it, else what the Event field's Go type encodes as.
func eventKeyKind(name, line string) string {
	for _, m := range members(json.RawMessage(line)) {
		if m.key == name {
			return kind(m.value)
		}
	}
	rt := reflect.TypeFor[event.Event]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if k, _, _ := strings.Cut(f.Tag.Get("json"), ","); k != name {
			continue
		}
		switch {
		case f.Type == reflect.TypeFor[time.Time]():
			return "string"
		case f.Type == reflect.TypeFor[json.RawMessage]():
			return "any JSON"
		case f.Type.Kind() == reflect.String:
			return "string"
		case f.Type.Kind() == reflect.Map:
			return "object"
		default:
			return "number"
		}
	}
	return "?"
}

// anchor is the heading id GitHub gives "### pool:open".
func anchor(t event.Type) string {
	return strings.NewReplacer(":", "").Replace(strings.ToLower(string(t)))
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// docs/trace-format.md is what the catalogue says; rewrite it with
// `go test ./trace -run TestTraceFormatDoc -update`.
func TestTraceFormatDoc(t *testing.T) {
	want := formatDocText(t)
	if t.Failed() {
		return
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(formatDoc), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(formatDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(formatDoc)
	if err != nil {
		t.Fatalf("%v: generate it with %s", err, formatDocUpdate)
	}
	if diff := firstDifference(string(got), want); diff != "" {
		t.Fatalf("docs/trace-format.md differs from the catalogue (engine/event/catalog.go): %s\nIf the catalogue is right, rewrite the file with %s", diff, formatDocUpdate)
	}
}

// firstDifference names the first line where got and want differ ("" if
// they do not).
func firstDifference(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		gl, wl := "(the file has ended)", "(the catalogue's text has ended)"
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if i >= len(g) || i >= len(w) || gl != wl {
			return fmt.Sprintf("line %d\n  file:      %q\n  catalogue: %q", i+1, gl, wl)
		}
	}
	return ""
}
