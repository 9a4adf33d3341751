package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// okText is the good harness the bad ones are made from.
func okText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadsAGoodHarness(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "ok.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Roles["reader"].MaxTurns != 4 || len(f.Run.Steps) != 2 || f.Tools["lines"].Command[0] != "./count.sh" || !f.Tools["lines"].ReadOnly {
		t.Fatalf("%+v", f)
	}
}

// Each bad harness gets one clear error naming file:line, the field and
// what to do, before anything runs.
func TestBadHarnessFiles(t *testing.T) {
	ok := okText(t)
	tests := []struct {
		name      string
		old, new_ string // replace old with new_ in ok.yaml ("" old: the whole text is new_)
		want      string
	}{
		{"unknown top-level key", "model:\n", "modle:\n", "testdata/bad.yaml:2: modle: unknown key: remove it, or use one of attachments, model, profiles, roles, run, sampling, services, tools"},
		{"unknown role key", "    max_turns: 4\n", "    max_turn: 4\n", "testdata/bad.yaml:29: roles.reader.max_turn: unknown key: remove it, or use one of best_of, judge, max_turns, min_tool_calls, pick, policy, pressure, recovery_prompt, refuse_free_text, system, system_file, terminal, time_hard, time_soft, tool_choice, tools, turn_tokens, walk, walk_first"},
		{"wrong type", "    max_turns: 4\n", "    max_turns: four\n", "testdata/bad.yaml:29: roles.reader.max_turns: Value is string but should be integer: write a whole number (e.g. 4)"},
		{"a number where text is asked", "    system: You read and answer.\n", "    system: 42\n", "testdata/bad.yaml:20: roles.reader.system: Value is integer but should be string: quote it (\"42\"); a time is written 30s or 2m"},
		{"a model file that is not there", "  context: 4096\n", "  context: 4096\n  path: models/nothere.gguf\n", "testdata/bad.yaml:4: model.path: models/nothere.gguf: no such file (a GGUF file relative to the harness file, or an ollama model name such as qwen3:0.6b)"},
		{"a projector that is not there", "  context: 4096\n", "  context: 4096\n  mmproj: nothere-mmproj.gguf\n", "testdata/bad.yaml:4: model.mmproj: nothere-mmproj.gguf: no such file (the model's vision projector, an mmproj GGUF file relative to the harness file)"},
		{"a context llama.cpp would round", "  context: 4096\n", "  context: 1000\n", "testdata/bad.yaml:3: model.context: 1000 should be a multiple of 256: use 1024"},
		{"an unquoted placeholder", "      task: \"Join: {{results.read}}\"\n", "      task: {{input}}\n", "testdata/bad.yaml:38: not valid YAML: could not find flow map content (a {{placeholder}} must be quoted: task: \"{{input}}\")"},
		{"a role's key indented as a role", "    max_turns: 4\n", "    max_turns: 4\n  tools: [search]\n", "testdata/bad.yaml:30: roles.tools: tools is a role's key, not a role: indent it under the role it belongs to, as that role's system is"},
		{"a chain's placeholder in a parallel step", "\"What is {{input}}?\"", "\"What is {{previous}}?\"", "testdata/bad.yaml:32: run.steps.0: {{previous}} is not a placeholder this step fills: use {{input}}, {{results.ID}}, {{findings.ID}} ({{previous}} is filled in a chain: orchestrate: chain)"},
		{"a tab", "    max_turns: 4\n", "\tmax_turns: 4\n", "testdata/bad.yaml:29: not valid YAML: found character '\t' that cannot start any token (indent with spaces: YAML does not take tabs)"},
		{"missing terminal schema", "      name: answer\n      schema:\n        type: object\n        properties:\n          text: {type: string}\n        required: [text]\n", "      name: answer\n", "testdata/bad.yaml:22: roles.reader.terminal: missing key schema: add it"},
		{"terminal schema not an object", "      schema:\n        type: object\n", "      schema:\n        type: string\n", "testdata/bad.yaml:24: roles.reader.terminal.schema: the terminal tool's schema must be a JSON Schema object (\"type\": \"object\") with the result's fields"},
		{"dag cycle", "    - role: reader\n      orchestrate: parallel\n      task: \"Join: {{results.read}}\"\n", "    - role: reader\n      orchestrate: dag\n      agents:\n        - {id: a, task: A, deps: [b]}\n        - {id: b, task: B, deps: [a]}\n", "testdata/bad.yaml:38: run.steps.1.agents: dag: cycle a → b → a: a dag's agents depend only on agents of the step, without a cycle"},
		{"tool named twice", "  lines:\n", "  search:\n", "testdata/bad.yaml:8: \"search\" is defined twice (first on line 5): rename or remove one"},
		{"tool named like the terminal", "    tools: [search, lines]\n", "    tools: [search, lines, answer]\n", "testdata/bad.yaml:21: roles.reader.tools.2: \"answer\" is named twice: the role's terminal tool has that name too; rename one"},
		{"lloyal's key given to a command", "    read_only: true\n", "    read_only: true\n    env: [PATH, LLOYAL_API_KEY]\n", "testdata/bad.yaml:17: tools.lines.env.1: LLOYAL_API_KEY is lloyal's credential, not the tool's: give the program its own variable (export MY_TOOL_KEY=… and list that)"},
		{"command not executable", "[./count.sh]", "[./docs/harbor.md]", "testdata/bad.yaml:9: tools.lines.command.0: ./docs/harbor.md is not executable: chmod +x it"},
		{"command missing", "[./count.sh]", "[./nothere.sh]", "testdata/bad.yaml:9: tools.lines.command.0: ./nothere.sh does not exist: give the program's path, relative to the harness file"},
		{"prompt file outside the folder", "    system: You read and answer.\n", "    system_file: ../load.go\n", "testdata/bad.yaml:20: roles.reader.system_file: ../load.go is outside the harness's folder: move the file beside the harness file"},
		{"role names an unknown tool", "    tools: [search, lines]\n", "    tools: [search, grep]\n", "testdata/bad.yaml:21: roles.reader.tools.1: no tool \"grep\": define it under tools (defined: lines, search)"},
		{"step names an unknown role", "      role: reader\n      orchestrate: parallel\n      tasks", "      role: writer\n      orchestrate: parallel\n      tasks", "testdata/bad.yaml:33: run.steps.0.role: no role \"writer\": define it under roles (defined: reader)"},
		{"results of a later step", "Join: {{results.read}}", "Join: {{results.later}}", "testdata/bad.yaml:36: run.steps.1: {{results.later}}: no earlier step has id \"later\" (a step reads only the steps before it)"},
		{"bad duration", "timeout: 5s", "timeout: 5 sec", "testdata/bad.yaml:17: tools.lines.timeout: not a duration: write 30s, 2m or 1m30s"},
		{"unknown orchestration", "orchestrate: parallel\n      tasks", "orchestrate: paralel\n      tasks", "testdata/bad.yaml:34: run.steps.0.orchestrate: Value paralel should be one of the allowed values: parallel, chain, dag, as_room_allows"},
		{"empty file", "", "# nothing yet\n", "testdata/bad.yaml: the file is empty: `lloyal harness init` writes a starter file"},
		{"not YAML", "", "roles: [a\nrun: {\n", "testdata/bad.yaml:2: not valid YAML: ',' or ']' must be specified"},
		{"both system and system_file", "    system: You read and answer.\n", "    system: You read and answer.\n    system_file: count.sh\n", "testdata/bad.yaml:19: roles.reader: both system and system_file: keep one"},
		{"corpus not a folder", "corpus: docs", "corpus: nodocs", "testdata/bad.yaml:7: tools.search.corpus: nodocs is not a folder: give the folder of .md/.txt files, relative to the harness file"},
		{"time_soft after time_hard", "    max_turns: 4\n", "    max_turns: 4\n    time_soft: 2m\n    time_hard: 1m\n", "testdata/bad.yaml:30: roles.reader.time_soft: time_soft (2m0s) must come before time_hard (1m0s)"},
		{"rerank names no service", "    corpus: docs\n", "    corpus: docs\n    rerank: ranker\n", "testdata/bad.yaml:8: tools.search.rerank: no service \"ranker\": define it under services, with kind: rerank or embed (defined: none)"},
		{"rerank names a judge", "tools:\n  search:\n    builtin: search\n    corpus: docs\n", "services:\n  ranker: {kind: judge, model: m, server: \"http://127.0.0.1:9\", labels: [a, b]}\ntools:\n  search:\n    builtin: search\n    corpus: docs\n    rerank: ranker\n", "testdata/bad.yaml:10: tools.search.rerank: service ranker is of kind judge: rerank needs a service of kind rerank (or embed, scoring by cosine)"},
		{"rerank on a command", "    read_only: true\n", "    read_only: true\n    rerank: ranker\n", "testdata/bad.yaml:17: tools.lines.rerank: rerank is for builtin: search tools (it scores a search's candidates): remove it"},
		{"judge without labels", "tools:\n", "services:\n  j: {kind: judge, model: m, server: \"http://127.0.0.1:9\"}\ntools:\n", "testdata/bad.yaml:5: services.j: a judge needs labels: its answers, at least two (labels: [relevant, irrelevant])"},
		{"labels on a reranker", "tools:\n", "services:\n  r:\n    kind: rerank\n    model: m\n    server: \"http://127.0.0.1:9\"\n    labels: [a, b]\ntools:\n", "testdata/bad.yaml:9: services.r.labels: labels are a judge's answers; a rerank service has none: remove them"},
		{"local service model missing", "tools:\n", "services:\n  r:\n    kind: rerank\n    model: nothere.gguf\ntools:\n", "testdata/bad.yaml:7: services.r.model: nothere.gguf: no such file (a GGUF file relative to the harness file, an ollama model name, or with server: the model's name there)"},
		{"unknown service kind", "tools:\n", "services:\n  r: {kind: score, model: m}\ntools:\n", "testdata/bad.yaml:5: services.r.kind: Value score should be one of the allowed values: rerank, embed, judge"},
		{"pick judge without a judge", "    max_turns: 4\n", "    max_turns: 4\n    best_of: 3\n    pick: judge\n", "testdata/bad.yaml:31: roles.reader.pick: pick: judge needs judge: SERVICE, a service of kind judge"},
		{"pick without best_of", "    max_turns: 4\n", "    max_turns: 4\n    pick: perplexity\n", "testdata/bad.yaml:30: roles.reader.pick: pick chooses among best_of's candidates: add best_of: N (2 or more) or remove pick"},
		{"judge names no service", "    max_turns: 4\n", "    max_turns: 4\n    best_of: 2\n    pick: judge\n    judge: j\n", "testdata/bad.yaml:32: roles.reader.judge: no service \"j\": define it under services, with kind: judge (defined: none)"},
		{"prompt of no ability", "      task: \"Join: {{results.read}}\"\n", "      prompt: {ability: notes, name: greet}\n", "testdata/bad.yaml:38: run.steps.1.prompt.ability: no tool names the ability \"notes\": add a tool with ability: notes (its server starts with the run) or name one the tools name (none)"},
		{"prompt and task", "      task: \"Join: {{results.read}}\"\n", "      task: \"Join: {{results.read}}\"\n      prompt: {ability: notes, name: greet}\n", "testdata/bad.yaml:36: run.steps.1: give exactly one of task (with each_file: one agent per file; with each_item: one per item), prompt (an ability's MCP prompt) or tasks\ntestdata/bad.yaml:39: run.steps.1.prompt.ability: no tool names the ability \"notes\": add a tool with ability: notes (its server starts with the run) or name one the tools name (none)"},
		{"delegate to no role", "  lines:\n    command: [./count.sh]\n", "  ask:\n    delegate: helper\n    description: Ask helpers.\n  lines:\n    command: [./count.sh]\n", "testdata/bad.yaml:9: tools.ask.delegate: no role \"helper\": define it under roles (defined: reader)"},
		{"a role that delegates to itself", "    tools: [search, lines]\n", "    tools: [search, lines, ask]\n", "testdata/bad.yaml:9: tools.ask.delegate: role \"reader\" can reach this tool again through its tools: its agents would start helpers without end; break the loop"},
		{"a loop of two delegates", "    tools: [search, lines]\n", "    tools: [search, lines, ask]\n", "testdata/bad.yaml:9: tools.ask.delegate: role \"helper\" can reach this tool again through its tools: its agents would start helpers without end; break the loop\ntestdata/bad.yaml:12: tools.back.delegate: role \"reader\" can reach this tool again through its tools: its agents would start helpers without end; break the loop"},
		{"each_file outside the folder", "      task: \"Join: {{results.read}}\"\n", "      task: \"Read {{file}}\"\n      each_file: ../load*.go\n", "testdata/bad.yaml:39: run.steps.1.each_file: ../load.go is outside the harness's folder: move the file beside the harness file"},
		{"each_file that matches nothing", "      task: \"Join: {{results.read}}\"\n", "      task: \"Read {{file}}\"\n      each_file: docs/*.rst\n", "testdata/bad.yaml:39: run.steps.1.each_file: \"docs/*.rst\" matches no file (relative to the harness file)"},
		{"a tool named with a slash", "  lines:\n", "  \"a/b\":\n    builtin: search\n    corpus: docs\n  lines:\n", "testdata/bad.yaml:8: tools.a/b: a tool's name is 1 to 64 letters, digits, _ or -: rename it"},
		{"an unknown key under a tool named 0", "  lines:\n", "  \"0\":\n    builtn: search\n  lines:\n", "testdata/bad.yaml:9: tools.0.builtn: unknown key: remove it, or use one of ability, builtin, command, corpus, delegate, description, env, folder, guards, max_tasks, narrow, parameters, read_only, rerank, timeout"},
		{"narrow on the wrong tool", "    corpus: docs\n", "    corpus: docs\n    narrow: hits\n", "testdata/bad.yaml:8: tools.search.narrow: narrow: hits is for read_file tools only: remove it"},
		{"publish without from", "      name: answer\n      schema:\n        type: object\n        properties:\n          text: {type: string}\n        required: [text]\n", "      builtin: publish\n", "testdata/bad.yaml:22: roles.reader.terminal: a publish terminal needs from: the id of the step whose reports it publishes"},
		{"each_item from no earlier step", "      tasks: [\"What is {{input}}?\", \"Where is {{input}}?\"]\n", "      task: \"{{item}}\"\n      each_item: later.questions\n", "testdata/bad.yaml:36: run.steps.0.each_item: later.questions: no earlier step has id \"later\" (a step reads only the steps before it)"},
		{"a profile that breaks the file", "      task: \"Join: {{results.read}}\"\n", "      task: \"Join: {{results.read}}\"\nprofiles:\n  demo:\n    roles:\n      reader: {tools: [search, nothing]}\n", "testdata/bad.yaml:42: profiles.demo: put over the file: roles.reader.tools.1: no tool \"nothing\": define it under tools (defined: lines, search)"},
		{"a profile naming a role the file lacks", "      task: \"Join: {{results.read}}\"\n", "      task: \"Join: {{results.read}}\"\nprofiles:\n  demo:\n    roles:\n      raeder: {max_turns: 2}\n", "testdata/bad.yaml:42: profiles.demo: put over the file: roles.raeder: the file has no role \"raeder\": a profile changes the file's roles and adds none (defined: reader)"},
		{"tool_choice naming no tool", "    max_turns: 4\n", "    max_turns: 4\n    tool_choice: write_note\n", "testdata/bad.yaml:30: roles.reader.tool_choice: \"write_note\": use auto, required or one of the role's tools (search, lines)"},
		{"follow_up naming no role", "run:\n", "run:\n  follow_up: writer\n", "testdata/bad.yaml:31: run.follow_up: no role \"writer\": define it under roles (defined: reader)"},
		{"a profile that sets read_only", "    read_only: true\n", "", "testdata/bad.yaml:43: profiles.small_context.tools.lines.read_only: a profile cannot set read_only: whether a tool is protected is set once, on the tool itself (tools.lines); remove it here"},
		{"a profile that makes write_note another tool", "  lines:\n", "  note:\n    builtin: write_note\n    folder: notes\n  lines:\n", "testdata/bad.yaml:45: profiles.demo.tools.note: this profile makes note not protected (the file: protected): whether a tool is protected is set once, on the tool itself; keep its kind (builtin, command, ability) here"},
		{"read_only on write_note", "  lines:\n", "  note:\n    builtin: write_note\n    folder: notes\n    read_only: true\n  lines:\n", "testdata/bad.yaml:11: tools.note.read_only: tool note is write_note, which is protected (a person approves each note it saves): read_only cannot change that; remove it"},
		{"read_only on an ability", "  lines:\n", "  mail:\n    ability: mail\n    read_only: true\n  lines:\n", "testdata/bad.yaml:10: tools.mail.read_only: tool mail: an ability's tools are protected as the ability says, and read_only cannot change that: remove it"},
		{"required not a list", "      required: [text]\n    read_only", "      required: text\n    read_only", "testdata/bad.yaml:15: tools.lines.parameters.required: required is a list of property names, e.g. required: [text]"},
		{"required naming no property", "      required: [text]\n    read_only", "      required: [txt]\n    read_only", "testdata/bad.yaml:15: tools.lines.parameters.required.0: required names \"txt\", which properties does not have: add it to properties or remove it here"},
		{"a type JSON Schema does not have", "        text: {type: string}\n      required: [text]\n    read_only", "        text: {type: str}\n      required: [text]\n    read_only", "testdata/bad.yaml:14: tools.lines.parameters.properties.text.type: \"str\" is not a JSON Schema type: use string, number, integer, boolean, array, object, null (string?)"},
		{"an array without items", "        text: {type: string}\n      required: [text]\n    read_only", "        text: {type: array}\n      required: [text]\n    read_only", "testdata/bad.yaml:14: tools.lines.parameters.properties.text: an array needs items: the schema of its elements (e.g. items: {type: string}), or the model cannot know what to put in it"},
		{"a terminal's property of no type", "          text: {type: string}\n        required: [text]\n    max_turns", "          text: {type: text}\n        required: [text]\n    max_turns", "testdata/bad.yaml:27: roles.reader.terminal.schema.properties.text.type: \"text\" is not a JSON Schema type: use string, number, integer, boolean, array, object, null"},
		{"a placeholder naming no parameter", "[./count.sh]", "[./count.sh, \"{{txt}}\"]", "testdata/bad.yaml:9: tools.lines.command.1: {{txt}} names no parameter: add txt under parameters.properties (given: text)"},
		{"a tool's key under its parameters", "    read_only: true\n", "      read_only: true\n", "testdata/bad.yaml:16: tools.lines.parameters.read_only: read_only belongs to the tool (tools.lines.read_only), not its parameters: move it out (indent it as description is)"},
		{"a role's key under its terminal", "      name: answer\n", "      name: answer\n      max_turns: 4\n", "testdata/bad.yaml:24: roles.reader.terminal.max_turns: unknown key: max_turns belongs to roles.reader, not here: move it out (indent it as roles.reader's other keys are)"},
		{"a model key at the top level", "model:\n", "gpu_layers: 3\nmodel:\n", "testdata/bad.yaml:2: gpu_layers: unknown key: gpu_layers belongs under model: move it there"},
		{"a mistyped placeholder", "\"What is {{input}}?\"", "\"What is {{inptu}}?\"", "testdata/bad.yaml:32: run.steps.0: {{inptu}} is not a placeholder this step fills: use {{input}}, {{results.ID}}, {{findings.ID}} (did you mean {{input}}?)"},
		{"each_item naming no list of the step's result", "      task: \"Join: {{results.read}}\"\n", "      task: \"Look at {{item}}\"\n      each_item: read.files\n", "testdata/bad.yaml:39: run.steps.1.each_item: read.files: step read's result has no list field \"files\" (its agents end with role reader's terminal; its lists: none)"},
		{"chain of one task", "orchestrate: parallel\n      tasks: [\"What is {{input}}?\", \"Where is {{input}}?\"]", "orchestrate: chain\n      tasks: [\"only one\"]", "testdata/bad.yaml:32: run.steps.0: a chain runs tasks one after another, each with {{previous}}: give tasks, two or more"},
	}
	// Cases that need a second replacement.
	more := map[string][][2]string{
		"a role that delegates to itself": {{"  lines:\n", "  ask:\n    delegate: reader\n    description: Ask helpers.\n  lines:\n"}},
		"a loop of two delegates": {{"  lines:\n", "  ask:\n    delegate: helper\n    description: Ask helpers.\n  back:\n    delegate: reader\n    description: Ask the reader.\n  lines:\n"},
			{"run:\n", "  helper:\n    system: You help.\n    tools: [back]\n    terminal: {name: answer, schema: {type: object}}\nrun:\n"}},
		"a profile that sets read_only":                {{"      task: \"Join: {{results.read}}\"\n", "      task: \"Join: {{results.read}}\"\nprofiles:\n  small_context:\n    tools:\n      lines:\n        timeout: 9s\n        read_only: true\n"}},
		"a profile that makes write_note another tool": {{"      task: \"Join: {{results.read}}\"\n", "      task: \"Join: {{results.read}}\"\nprofiles:\n  demo:\n    tools:\n      note: {builtin: search}\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.new_
			if tt.old != "" {
				if !strings.Contains(ok, tt.old) {
					t.Fatalf("ok.yaml lacks %q", tt.old)
				}
				text = strings.Replace(ok, tt.old, tt.new_, 1)
			}
			for _, m := range more[tt.name] {
				text = strings.Replace(text, m[0], m[1], 1)
			}
			_, err := Parse(filepath.Join("testdata", "bad.yaml"), []byte(text))
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Error() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

// A harness file is read as a regular file of at most maxFile bytes: a FIFO
// named as one would wait for a writer for good, a huge file is the wrong
// one.
func TestAHarnessFileIsARegularFileOfBoundedSize(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# a comment\n"), maxFile/12+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{big, "larger than 1024 KiB"},
	} {
		if _, err := Load(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}

// A role may be called as a role's key is (a judge): only one that is no
// role reads as a key indented too little, in a file whose other problems
// too.
func TestARoleNamedLikeARolesKey(t *testing.T) {
	text := "roles:\n  judge:\n    system: You judge.\n    terminal: {builtin: report}\nrun:\n  input: hi\n  steps:\n    - {role: judge, orchestrate: parallel, task: \"{{input}}\"}\n"
	if _, err := Parse(filepath.Join(t.TempDir(), "h.yaml"), []byte(text)); err != nil {
		t.Fatal(err)
	}
	_, err := Parse(filepath.Join(t.TempDir(), "h.yaml"), []byte("modle: {}\n"+text))
	if err == nil || strings.Contains(err.Error(), "roles.judge") || !strings.Contains(err.Error(), "modle") {
		t.Fatalf("a file with a real role called judge and another problem: %v", err)
	}
}
