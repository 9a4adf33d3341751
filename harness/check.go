package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/services"
)

// check finds what the schema cannot: names that must match, files that
// must exist, a graph that must not loop.
func check(f *File, tree *ast.File) []Problem {
	c := &checker{f: f, tree: tree}
	c.model()
	for _, name := range sortedKeys(f.Tools) {
		c.tool(name, f.Tools[name])
	}
	for _, name := range sortedKeys(f.Services) {
		c.service(name, f.Services[name])
	}
	for _, name := range sortedKeys(f.Roles) {
		c.role(name, f.Roles[name])
	}
	if r := f.Run.FollowUp; r != "" {
		if _, ok := f.Roles[r]; !ok {
			c.add("/run/follow_up", "no role %q: define it under roles (defined: %s)", r, list(sortedKeys(f.Roles)))
		} else if !slices.ContainsFunc(f.Run.Steps, func(s Step) bool { return s.Role == r }) {
			c.add("/run/follow_up", "no step runs role %q: follow-ups fork from that role's step", r)
		}
	}
	c.attachments()
	ids := map[string]bool{}
	for i, s := range f.Run.Steps {
		c.step(i, s, ids)
		if s.ID != "" {
			ids[s.ID] = true
		}
	}
	sort.SliceStable(c.out, func(i, j int) bool { return c.out[i].Line < c.out[j].Line })
	return c.out
}

type checker struct {
	f    *File
	tree *ast.File
	out  []Problem
}

// add records a problem at the key the pointer names.
func (c *checker) add(ptr, format string, args ...any) {
	c.out = append(c.out, Problem{Line: lineOf(c.tree, ptr), Field: pointerField(ptr), Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) tool(name string, t Tool) {
	at := "/tools/" + escape(name)
	if !toolName.MatchString(name) {
		c.add(at, "a tool's name is 1 to 64 letters, digits, _ or -: rename it")
	}
	kinds := 0
	for _, set := range []bool{t.Builtin != "", len(t.Command) > 0, t.Delegate != "", t.Ability != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		c.add(at, "a tool is one of builtin, command, delegate or ability: keep one")
	case kinds == 0:
		c.add(at, "say which tool this is: builtin (e.g. builtin: search), command (command: [./script]), delegate (delegate: ROLE) or ability (ability: NAME)")
	case t.Ability != "":
		// Its tools are known only when its server starts (lloyal run).
		if t.ReadOnly {
			c.add(at+"/read_only", "tool %s: an ability's tools are protected as the ability says, and read_only cannot change that: remove it", name)
		}
	case t.Delegate != "":
		c.delegate(at, name, t)
	case t.Builtin != "":
		c.builtin(at, name, t)
	default:
		c.command(at, t)
	}
	if want, ok := narrowedTool(t.Narrow); ok && !(t.Builtin == want || want == "delegate" && t.Delegate != "") {
		c.add(at+"/narrow", "narrow: %s is for %s tools only: remove it", t.Narrow, want)
	}
	if t.Rerank != "" {
		sv, ok := c.f.Services[t.Rerank]
		switch {
		case t.Builtin != "search":
			c.add(at+"/rerank", "rerank is for builtin: search tools (it scores a search's candidates): remove it")
		case !ok:
			c.add(at+"/rerank", "no service %q: define it under services, with kind: rerank or embed (defined: %s)", t.Rerank, list(sortedKeys(c.f.Services)))
		case sv.Kind != string(services.Rerank) && sv.Kind != string(services.Embed):
			c.add(at+"/rerank", "service %s is of kind %s: rerank needs a service of kind rerank (or embed, scoring by cosine)", t.Rerank, sv.Kind)
		}
	}
	for i, g := range t.Guards {
		if _, _, ok := engine.NamedGuard(g); !ok {
			c.add(fmt.Sprintf("%s/guards/%d", at, i), "%q is no guard: write same-FIELD (the agent's own repeat) or sibling-FIELD (another agent's), FIELD an argument of the tool, e.g. same-query", g)
		}
	}
	if t.Timeout != "" {
		if _, err := time.ParseDuration(t.Timeout); err != nil {
			c.add(at+"/timeout", "%q is not a duration: write 30s, 2m or 1m30s", t.Timeout)
		}
	}
}

// model checks that the files the model section names are there (a run
// refuses them only once it opens the model; check should say first).
func (c *checker) model() {
	m := c.f.Model
	if m.Server != "" {
		return // a name on the server, which sees with its own projector
	}
	if strings.HasSuffix(m.Path, ".gguf") {
		c.file("/model/path", m.Path, "a GGUF file relative to the harness file, or an ollama model name such as qwen3:0.6b")
	}
	if m.MMProj != "" {
		c.file("/model/mmproj", m.MMProj, "the model's vision projector, an mmproj GGUF file relative to the harness file")
	}
}

// file is a problem at ptr where path (relative to the harness file) is
// not there, saying what it should be.
func (c *checker) file(ptr, path, what string) {
	if _, err := os.Stat(c.f.Rel(path)); err != nil {
		c.add(ptr, "%s: no such file (%s)", path, what)
	}
}

// service checks a services entry beyond the schema.
func (c *checker) service(name string, s Service) {
	at := "/services/" + escape(name)
	if s.Kind == string(services.Judge) && len(s.Labels) < 2 {
		c.add(at, "a judge needs labels: its answers, at least two (labels: [relevant, irrelevant])")
	}
	if s.Kind != string(services.Judge) && len(s.Labels) > 0 {
		c.add(at+"/labels", "labels are a judge's answers; a %s service has none: remove them", s.Kind)
	}
	if s.Server == "" && strings.HasSuffix(s.Model, ".gguf") {
		c.file(at+"/model", s.Model, "a GGUF file relative to the harness file, an ollama model name, or with server: the model's name there")
	}
	if s.Server != "" && (s.Context > 0 || s.Threads > 0 || s.GPULayers != nil) {
		c.add(at+"/server", "context, threads and gpu_layers size a model run here; a server sizes its own: remove them or the server")
	}
}

// protection is whether a tool asks before each call: a command unless it
// is read_only, a protected built-in kind (write_note) always, an
// ability's tools as the ability says, the other built-in tools and
// delegates never.
func (t Tool) protection() string {
	switch {
	case t.Ability != "":
		return "protected as its ability says"
	case len(t.Command) > 0:
		if t.ReadOnly {
			return "not protected"
		}
		return "protected"
	case t.builtinKind().protected:
		return "protected"
	}
	return "not protected"
}

// protectionKept checks that the profile name, which made g of f, changes
// no tool's protection: a profile applies only on some models and
// contexts (the demo model, a small context), where a tool the file
// protects would otherwise run without asking, and `harness check` of the
// file would not show it. Protection is set once, on the tool itself.
func protectionKept(f, g *File, name string, tree *ast.File) []Problem {
	c := &checker{f: f, tree: tree}
	over, _ := f.Profiles[name]["tools"].(map[string]any)
	for _, tool := range sortedKeys(g.Tools) {
		at := "/profiles/" + escape(name) + "/tools/" + escape(tool)
		if entry, _ := over[tool].(map[string]any); entry != nil {
			if _, set := entry["read_only"]; set {
				c.add(at+"/read_only", "a profile cannot set read_only: whether a tool is protected is set once, on the tool itself (tools.%s); remove it here", tool)
				continue
			}
		}
		if was, ok := f.Tools[tool]; ok && was.protection() != g.Tools[tool].protection() {
			c.add(at, "this profile makes %s %s (the file: %s): whether a tool is protected is set once, on the tool itself; keep its kind (builtin, command, ability) here", tool, g.Tools[tool].protection(), was.protection())
		}
	}
	return c.out
}

// builtin checks a built-in tool: the corpus folder of a kind that reads
// one (none: the built-in handbook), then what its kind checks. The schema
// admits only the kinds there are.
func (c *checker) builtin(at, name string, t Tool) {
	k := t.builtinKind()
	if fi, err := os.Stat(c.f.Rel(t.Corpus)); k.read != nil && t.Corpus != "" && (err != nil || !fi.IsDir()) {
		c.add(at+"/corpus", "%s is not a folder: give the folder of .md/.txt files, relative to the harness file", t.Corpus)
	}
	if k.check != nil {
		k.check(c, at, name, t)
	}
}

// delegate checks a delegate tool: its role exists and its agents cannot
// delegate back (a loop of helpers starting helpers).
func (c *checker) delegate(at, name string, t Tool) {
	_, ok := c.f.Roles[t.Delegate]
	switch {
	case !ok:
		c.add(at+"/delegate", "no role %q: define it under roles (defined: %s)", t.Delegate, list(sortedKeys(c.f.Roles)))
	case c.f.delegatesBack(name, t.Delegate):
		c.add(at+"/delegate", "role %q can reach this tool again through its tools: its agents would start helpers without end; break the loop", t.Delegate)
	case t.Description == "":
		c.add(at, "a delegate tool needs description: the model reads it to know when to hand work on")
	}
}

// delegatesBack reports whether an agent of role, through its tools and
// the roles they delegate to, can reach the delegate tool named tool.
func (f *File) delegatesBack(tool, role string) bool {
	seen := map[string]bool{}
	var reach func(role string) bool
	reach = func(role string) bool {
		if seen[role] {
			return false
		}
		seen[role] = true
		for _, name := range f.Roles[role].Tools {
			if name == tool {
				return true
			}
			if d := f.Tools[name].Delegate; d != "" && reach(d) {
				return true
			}
		}
		return false
	}
	return reach(role)
}

// command checks a command tool's executable before any run.
func (c *checker) command(at string, t Tool) {
	if t.Description == "" {
		c.add(at, "a command tool needs description: the model reads it to know when to call the tool")
	}
	if _, err := c.f.executable(t.Command[0]); err != nil {
		c.add(at+"/command/0", "%v", err)
	}
	props, _ := t.Parameters["properties"].(map[string]any)
	for i, a := range t.Command {
		for _, name := range Placeholders([]string{a}) {
			switch {
			case i == 0:
				c.add(at+"/command/0", "the program cannot be a placeholder: name it (a path relative to the harness file, or a name on PATH)")
			case props[name] == nil:
				c.add(fmt.Sprintf("%s/command/%d", at, i), "{{%s}} names no parameter: add %s under parameters.properties (given: %s)", name, name, list(sortedKeys(props)))
			}
		}
	}
	// A tool's key indented under its parameters is no JSON Schema keyword,
	// so the schema would take it silently (read_only: true there leaves
	// the tool protected without a word).
	keys := toolKeys()
	for _, k := range sortedKeys(t.Parameters) {
		if k != "description" && k != "type" && slices.Contains(keys, k) {
			c.add(at+"/parameters/"+escape(k), "%s belongs to the tool (%s), not its parameters: move it out (indent it as description is)", k, pointerField(at+"/"+escape(k)))
		}
	}
	if t.Parameters != nil {
		c.schema(at+"/parameters", `a command tool's parameters must be a JSON Schema object ("type": "object") with a property for each argument`, t.Parameters)
	}
	// lloyal's own keys go only where the person sends them: a harness
	// file (perhaps someone else's) cannot hand them to its programs.
	for i, n := range t.Env {
		if n == "LLOYAL_API_KEY" || n == "LLOYAL_HEADERS" || n == "LLOYAL_SERVER" || strings.HasPrefix(n, services.KeyPrefix) || strings.HasPrefix(n, services.ServerPrefix) {
			c.add(fmt.Sprintf("%s/env/%d", at, i), "%s is lloyal's credential, not the tool's: give the program its own variable (export MY_TOOL_KEY=… and list that)", n)
		}
	}
}

// toolKeys are the keys a tool entry takes.
func toolKeys() []string {
	var s map[string]any
	_ = json.Unmarshal(schemaJSON(), &s)
	return propsAt(s, []string{"tools", "x"})
}

// schema checks a JSON Schema the file gives (a command's parameters, a
// terminal's result) at its own lines: it must describe an object (else
// notObject is said), and engine.CheckSchema's mistakes are each reported
// where they are.
func (c *checker) schema(at, notObject string, s map[string]any) {
	if typ, _ := s["type"].(string); typ != "object" {
		c.add(at, "%s", notObject)
		return
	}
	for _, p := range engine.CheckSchema(mustJSON(s)) {
		c.add(at+p.Pointer, "%s", p.Msg)
	}
}

// executable is a command's program: a path (relative to the harness
// file's folder) that must be an executable file, or a bare name found on
// PATH.
func (f *File) executable(name string) (string, error) {
	if !strings.ContainsRune(name, '/') {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%q is not on PATH: give its path, relative to the harness file", name)
		}
		return p, nil
	}
	p := f.Rel(name)
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s does not exist: give the program's path, relative to the harness file", name)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable: chmod +x it", name)
	}
	return p, nil
}

func (c *checker) role(name string, r Role) {
	at := "/roles/" + escape(name)
	if r.BestOf > 1 && c.f.Sampling.Temperature != nil && *c.f.Sampling.Temperature == 0 {
		c.add(at+"/best_of", "best_of's candidates would all write the same at temperature 0 (sampling.temperature): raise the temperature or remove best_of")
	}
	if r.BestOf > 1 {
		for i, st := range c.f.Run.Steps {
			if st.Role == name && st.Orchestrate != Parallel && st.Orchestrate != "" {
				c.add(fmt.Sprintf("/run/steps/%d/orchestrate", i), "role %s has best_of: its candidates run in a parallel step only (this one is %s): make the step parallel or remove best_of", name, st.Orchestrate)
			}
		}
	}
	switch {
	case r.Pick == PickJudge && r.Judge == "":
		c.add(at+"/pick", "pick: judge needs judge: SERVICE, a service of kind judge")
	case r.Judge != "" && r.Pick != PickJudge:
		c.add(at+"/judge", "judge is read by pick: judge only: add it or remove judge")
	case r.Judge != "":
		if sv, ok := c.f.Services[r.Judge]; !ok {
			c.add(at+"/judge", "no service %q: define it under services, with kind: judge (defined: %s)", r.Judge, list(sortedKeys(c.f.Services)))
		} else if sv.Kind != string(services.Judge) {
			c.add(at+"/judge", "service %s is of kind %s: pick: judge needs a service of kind judge", r.Judge, sv.Kind)
		}
	}
	if (r.Pick != "" || r.Judge != "") && r.BestOf < 2 {
		c.add(at+"/pick", "pick chooses among best_of's candidates: add best_of: N (2 or more) or remove pick")
	}
	switch {
	case r.System == "" && r.SystemFile == "":
		c.add(at, "no system prompt: add system (the prompt) or system_file (a file beside the harness)")
	case r.System != "" && r.SystemFile != "":
		c.add(at, "both system and system_file: keep one")
	case r.SystemFile != "":
		if _, err := c.f.inside(r.SystemFile); err != nil {
			c.add(at+"/system_file", "%v", err)
		}
	}
	term := r.Terminal.name()
	for i, t := range r.Tools {
		if _, ok := c.f.Tools[t]; !ok && t != term {
			c.add(fmt.Sprintf("%s/tools/%d", at, i), "no tool %q: define it under tools (defined: %s)", t, list(sortedKeys(c.f.Tools)))
		}
		if t == term {
			c.add(fmt.Sprintf("%s/tools/%d", at, i), "%q is named twice: the role's terminal tool has that name too; rename one", t)
		}
	}
	c.terminal(at+"/terminal", r.Terminal)
	if tc := r.ToolChoice; tc != "" && tc != "auto" && tc != "required" && !slices.Contains(r.Tools, tc) {
		c.add(at+"/tool_choice", "%q: use auto, required or one of the role's tools (%s)", tc, list(r.Tools))
	}
	abilities := false // an ability's tools are named by its server: a walk may name them
	for _, t := range r.Tools {
		abilities = abilities || c.f.Tools[t].Ability != ""
	}
	for key, walk := range map[string][]string{"walk": r.Walk, "walk_first": r.WalkFirst} {
		for i, w := range walk {
			if w != term && !slices.Contains(r.Tools, w) && !abilities {
				c.add(fmt.Sprintf("%s/%s/%d", at, key, i), "%q is not one of the role's tools or its terminal tool", w)
			}
		}
	}
	soft, errSoft := parseDuration(r.TimeSoft)
	hard, errHard := parseDuration(r.TimeHard)
	if errSoft != nil {
		c.add(at+"/time_soft", "%v", errSoft)
	}
	if errHard != nil {
		c.add(at+"/time_hard", "%v", errHard)
	}
	if soft > 0 && hard > 0 && soft >= hard {
		c.add(at+"/time_soft", "time_soft (%s) must come before time_hard (%s)", soft, hard)
	}
	if r.Pressure.Soft > 0 && r.Pressure.Hard > 0 && r.Pressure.Soft <= r.Pressure.Hard {
		c.add(at+"/pressure", "soft (%d) must be above hard (%d): agents are asked to report at soft, stopped at hard", r.Pressure.Soft, r.Pressure.Hard)
	}
}

// terminal checks a role's terminal tool: a builtin, or a name and a
// schema that compiles.
func (c *checker) terminal(at string, t Terminal) {
	switch t.Builtin {
	case "":
		switch {
		case t.Name == "":
			c.add(at, "give the terminal tool a name and a schema, or a builtin (plan, report or publish)")
			return
		case t.Schema == nil:
			c.add(at, "missing key schema: add it")
			return
		}
		c.schema(at+"/schema", `the terminal tool's schema must be a JSON Schema object ("type": "object") with the result's fields`, t.Schema)
	}
	k, _ := terminalKindOf(t.Builtin)
	if k.check != nil {
		k.check(c, at, t)
	}
	if t.Builtin != "" && t.Schema != nil {
		c.add(at+"/schema", "a %s terminal has its own schema: remove schema", t.Builtin)
	}
	if t.Narrow != "" && !k.narrow {
		c.add(at+"/narrow", "narrow: clauses is for a plan terminal only: remove it")
	}
}

// maxEachFiles bounds the files one each_file glob gives tasks to.
const maxEachFiles = 256

// eachFile are the files a step's each_file glob matches, each inside the
// harness's folder, in order.
func (f *File) eachFile(glob string) ([]string, error) {
	files, err := filepath.Glob(f.Rel(glob))
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid glob: %v", glob, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%q matches no file (relative to the harness file)", glob)
	}
	if len(files) > maxEachFiles {
		return nil, fmt.Errorf("%q matches %d files, and each would be an agent's task: narrow it to at most %d", glob, len(files), maxEachFiles)
	}
	slices.Sort(files)
	dir := filepath.Dir(f.Path)
	for i, file := range files {
		rel, err := filepath.Rel(dir, file)
		if err != nil {
			return nil, err
		}
		if files[i], err = f.inside(rel); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// attachments checks the file's attachments: each a file inside its
// folder that Stage reads, the names unique, no more than a run takes.
func (c *checker) attachments() {
	if n := len(c.f.Attachments); n > MaxAttachments {
		c.add("/attachments", "%d attachments: a run takes at most %d", n, MaxAttachments)
	}
	seen := map[string]bool{}
	for i, p := range c.f.Attachments {
		at := fmt.Sprintf("/attachments/%d", i)
		full, err := c.f.inside(p)
		if err == nil {
			err = checkAttachment(full)
		}
		if err != nil {
			c.add(at, "%v", err)
		}
		if name := filepath.Base(p); seen[name] {
			c.add(at, "a second attachment named %s: the model asks for attachments by name; rename one", name)
		} else {
			seen[name] = true
		}
	}
}

// inside is p (relative to the harness's folder) when it stays inside that
// folder, symlinks followed.
func (f *File) inside(p string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(f.Path))
	if err != nil {
		return "", fmt.Errorf("the harness's folder: %w", err)
	}
	full, err := filepath.EvalSymlinks(f.Rel(p))
	if err != nil {
		return "", fmt.Errorf("%s does not exist: give a file in the harness's folder", p)
	}
	if r, err := filepath.Rel(dir, full); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%s is outside the harness's folder: move the file beside the harness file", p)
	}
	return full, nil
}

func (c *checker) step(i int, s Step, earlier map[string]bool) {
	at := fmt.Sprintf("/run/steps/%d", i)
	if _, ok := c.f.Roles[s.Role]; !ok {
		c.add(at+"/role", "no role %q: define it under roles (defined: %s)", s.Role, list(sortedKeys(c.f.Roles)))
	}
	if s.ID != "" && earlier[s.ID] {
		c.add(at+"/id", "step id %q is used twice: ids name steps for {{results.ID}}", s.ID)
	}
	if pr := s.Prompt; pr != nil {
		if !slices.Contains(c.f.Abilities(), pr.Ability) || pr.Ability == AllAbilities {
			c.add(at+"/prompt/ability", "no tool names the ability %q: add a tool with ability: %s (its server starts with the run) or name one the tools name (%s)", pr.Ability, pr.Ability, list(c.f.Abilities()))
		}
		if s.EachFile != "" || s.EachItem != "" {
			c.add(at+"/prompt", "a prompt is the step's one task: each_file and each_item make several; remove one")
		}
	}
	given := 0
	for _, b := range []bool{s.Task != "", s.Prompt != nil, len(s.Tasks) > 0, len(s.Agents) > 0} {
		if b {
			given++
		}
	}
	switch {
	case s.Orchestrate == DAG && (len(s.Agents) == 0 || given > 1):
		c.add(at, "a dag step lists its agents (id, task, deps) and nothing else: move task/tasks into agents")
	case s.Orchestrate != DAG && len(s.Agents) > 0:
		c.add(at+"/agents", "agents (with deps) are for orchestrate: dag; use tasks for %s", s.Orchestrate)
	case s.Orchestrate != DAG && given != 1:
		c.add(at, "give exactly one of task (with each_file: one agent per file; with each_item: one per item), prompt (an ability's MCP prompt) or tasks")
	case s.EachFile != "" && s.Task == "":
		c.add(at+"/each_file", "each_file needs task: the task for each file, with {{file}} and {{text}}")
	case s.EachItem != "" && (s.Task == "" || s.EachFile != ""):
		c.add(at+"/each_item", "each_item needs task (the task for each item, with {{item}}) and no each_file")
	case s.Orchestrate == Chain && s.EachFile == "" && len(s.Tasks) < 2:
		c.add(at, "a chain runs tasks one after another, each with {{previous}}: give tasks, two or more")
	}
	if id, field, _ := strings.Cut(s.EachItem, "."); s.EachItem != "" && !earlier[id] {
		c.add(at+"/each_item", "%s: no earlier step has id %q (a step reads only the steps before it)", s.EachItem, id)
	} else if s.EachItem != "" {
		c.eachItemField(at+"/each_item", id, field)
	}
	c.placeholders(at, s)
	if from := c.f.Roles[s.Role].Terminal.From; from != "" && !earlier[from] {
		c.add(at+"/role", "role %s publishes the reports of step %q: no earlier step has that id", s.Role, from)
	}
	if s.EachFile != "" {
		if _, err := c.f.eachFile(s.EachFile); err != nil {
			c.add(at+"/each_file", "%v", err)
		}
	}
	if s.Orchestrate == DAG && len(s.Agents) > 0 {
		var nodes []engine.Node
		for _, a := range s.Agents {
			nodes = append(nodes, engine.Node{ID: a.ID, Deps: a.Deps})
		}
		if err := engine.ValidateDAG(nodes); err != nil {
			c.add(at+"/agents", "%v: a dag's agents depend only on agents of the step, without a cycle", err)
		}
	}
	for _, t := range append(append([]string{s.Task}, s.Tasks...), agentTasks(s.Agents)...) {
		for _, m := range resultRef.FindAllStringSubmatch(t, -1) {
			if !earlier[m[2]] {
				c.add(at, "{{%s.%s}}: no earlier step has id %q (a step reads only the steps before it)", m[1], m[2], m[2])
			}
		}
	}
}

// filledBy says which steps fill a placeholder that only some do.
var filledBy = map[string]string{
	"item":     " ({{item}} is filled by a step with each_item)",
	"file":     " ({{file}} is filled by a step with each_file)",
	"text":     " ({{text}} is filled by a step with each_file)",
	"previous": " ({{previous}} is filled in a chain: orchestrate: chain)",
	"deps":     " ({{deps}} is filled in a dag's agents: orchestrate: dag)",
}

// placeholders checks that every {{name}} in a step's tasks is one the
// step fills: {{input}}, {{results.ID}} and {{findings.ID}} anywhere,
// {{item}} with each_item, {{file}} and {{text}} with each_file,
// {{previous}} in a chain, {{deps}} in a dag's agents. Another would
// reach the agents as it is written.
func (c *checker) placeholders(at string, s Step) {
	fills := []string{"input"}
	switch {
	case s.EachItem != "":
		fills = append(fills, "item")
	case s.EachFile != "":
		fills = append(fills, "file", "text")
	}
	if s.Orchestrate == Chain {
		fills = append(fills, "previous")
	}
	if s.Orchestrate == DAG {
		fills = append(fills, "deps")
	}
	for _, t := range append(append([]string{s.Task}, s.Tasks...), agentTasks(s.Agents)...) {
		for _, m := range anyPlaceholder.FindAllStringSubmatch(t, -1) {
			name := m[1]
			if slices.Contains(fills, name) || resultRef.MatchString(m[0]) {
				continue
			}
			c.add(at, "{{%s}} is not a placeholder this step fills: use %s%s%s", name, placeholderList(fills), nearest(name, fills), filledBy[name])
		}
	}
}

// placeholderList is names as placeholders, with the results ones.
func placeholderList(names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, "{{"+n+"}}")
	}
	return strings.Join(append(out, "{{results.ID}}", "{{findings.ID}}"), ", ")
}

// nearest suggests the name of names a mistyped one was likely meant to
// be: one of the same letters, or one edit away.
func nearest(name string, names []string) string {
	for _, n := range names {
		if sameLetters(n, name) || editDistance(n, name) <= 1 {
			return fmt.Sprintf(" (did you mean {{%s}}?)", n)
		}
	}
	return ""
}

func sameLetters(a, b string) bool {
	x, y := []rune(a), []rune(b)
	slices.Sort(x)
	slices.Sort(y)
	return string(x) == string(y)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// eachItemField checks each_item's FIELD against what step id's agents
// return: a list field of its terminal's schema (or the built-in
// terminal's result), else the step would run one agent on the input.
func (c *checker) eachItemField(at, id, field string) {
	var step *Step
	for i := range c.f.Run.Steps {
		if c.f.Run.Steps[i].ID == id {
			step = &c.f.Run.Steps[i]
		}
	}
	if step == nil || field == "" {
		if field == "" {
			c.add(at, "each_item is STEP.FIELD: the step's id and the list field of its result (e.g. %s.questions)", id)
		}
		return
	}
	t := c.f.Roles[step.Role].Terminal
	var fields []string
	if k, ok := terminalKindOf(t.Builtin); ok {
		fields = k.lists
	} else {
		props, _ := t.Schema["properties"].(map[string]any)
		for _, name := range sortedKeys(props) {
			if p, _ := props[name].(map[string]any); p["type"] == "array" {
				fields = append(fields, name)
			}
		}
	}
	if !slices.Contains(fields, field) {
		c.add(at, "%s.%s: step %s's result has no list field %q (its agents end with role %s's terminal; its lists: %s)", id, field, id, field, step.Role, list(fields))
	}
}

var (
	// anyPlaceholder is a {{name}} in a task, results ones included.
	anyPlaceholder = regexp.MustCompile(`{{\s*([A-Za-z0-9_.-]+)\s*}}`)
	toolName       = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// resultRef is {{results.ID}} (each agent's task and result) or
	// {{findings.ID}} (each agent's report: answer and sources).
	resultRef = regexp.MustCompile(`{{\s*(results|findings)\.([a-z][a-z0-9_-]*)\s*}}`)
)

// escape is a key as a JSON pointer segment ("/" as ~1, "~" as ~0).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func agentTasks(as []Agent) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Task)
	}
	return out
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write 30s, 2m or 1m30s", s)
	}
	return d, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
