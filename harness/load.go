package harness

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/kaptinlin/jsonschema"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/regular"
)

// maxFile is the largest harness file read: a program of agents is a page
// or two, and a file much larger is the wrong file.
const maxFile = 1 << 20

// Problem is one thing wrong in a harness file: where, and what to do.
type Problem struct {
	Line  int    // 0: the file as a whole
	Field string // the key's path, e.g. roles.reviewer.max_turns
	Msg   string
}

// Error is every problem found in one harness file.
type Error struct {
	Path     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Path)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Msg)
	}
	return b.String()
}

// Load reads, checks and returns the harness file at path. Every problem
// it finds (syntax, an unknown key, a wrong type, a rule of the schema, a
// role naming a tool that is not there, a DAG cycle, a command that is not
// executable, a prompt file outside the harness's folder) is in one *Error,
// each with its line and what to do; nothing is run and no model loads.
func Load(path string) (*File, error) {
	f, err := regular.Open(path)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", path, err)
	}
	if len(data) > maxFile {
		return nil, &Error{Path: path, Problems: []Problem{{Msg: fmt.Sprintf("larger than %d KiB: is it the right file?", maxFile>>10)}}}
	}
	return Parse(path, data)
}

// Parse checks data, a harness file's text read from path (relative paths
// in it are relative to path's folder), and returns it.
func Parse(path string, data []byte) (*File, error) {
	e := &Error{Path: path}
	tree, err := parser.ParseBytes(data, 0)
	if err != nil {
		e.Problems = append(e.Problems, syntaxProblem(err))
		return nil, e
	}
	if p := aliasProblem(tree); p != nil {
		e.Problems = append(e.Problems, *p)
		return nil, e
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		e.Problems = append(e.Problems, syntaxProblem(err))
		return nil, e
	}
	if doc == nil {
		e.Problems = append(e.Problems, Problem{Msg: "the file is empty: `lloyal harness init` writes a starter file"})
		return nil, e
	}
	e.Problems = append(e.Problems, validate(doc, tree)...)
	if len(e.Problems) > 0 {
		return nil, e
	}
	sum := sha256.Sum256(data)
	f := &File{SHA256: hex.EncodeToString(sum[:])}
	f.doc, _ = doc.(map[string]any)
	if err := yaml.UnmarshalWithOptions(data, f, yaml.Strict()); err != nil {
		e.Problems = append(e.Problems, syntaxProblem(err))
		return nil, e
	}
	// Absolute: a command's program and the files a run reads are found
	// relative to the harness's folder, wherever lloyal runs from.
	if f.Path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("harness %s: %w", path, err)
	}
	e.Problems = append(e.Problems, check(f, tree)...)
	if len(e.Problems) > 0 {
		return nil, e
	}
	// Each profile must make a good file too: a run that applies one
	// finds no new problem after its model loads.
	for _, name := range sortedKeys(f.Profiles) {
		g, err := f.With(name)
		if err == nil {
			e.Problems = append(e.Problems, protectionKept(f, g, name, tree)...)
		}
		var pe *Error
		if errors.As(err, &pe) {
			added := map[string]bool{}
			for _, p := range pe.Problems {
				msg := p.Msg
				if p.Field != "" {
					msg = p.Field + ": " + msg
				}
				// At the profile's own key where it has one.
				ptr := "/profiles/" + escape(name)
				for _, seg := range strings.Split(p.Field, ".") {
					if seg != "" {
						ptr += "/" + escape(seg)
					}
				}
				if role, ok := strings.CutPrefix(p.Field, "roles."); ok {
					role, _, _ = strings.Cut(role, ".")
					if _, there := f.Roles[role]; !there {
						// A role the file lacks (a typo of one): the profile made it.
						if added[role] {
							continue
						}
						added[role] = true
						msg = fmt.Sprintf("roles.%s: the file has no role %q: a profile changes the file's roles and adds none (defined: %s)", role, role, list(sortedKeys(f.Roles)))
					}
				}
				e.Problems = append(e.Problems, Problem{Line: lineOf(tree, ptr), Field: "profiles." + name, Msg: "put over the file: " + msg})
			}
		}
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	return f, nil
}

// syntaxProblem is a YAML error as a problem at its line.
func syntaxProblem(err error) Problem {
	var se yaml.Error
	if errors.As(err, &se) {
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			msg := se.GetMessage()
			if key, first, ok := strings.Cut(strings.TrimPrefix(msg, "mapping key "), " already defined at "); ok {
				line, _, _ := strings.Cut(strings.TrimPrefix(first, "["), ":")
				return Problem{Line: tk.Position.Line, Msg: fmt.Sprintf("%s is defined twice (first on line %s): rename or remove one", key, line)}
			}
			return Problem{Line: tk.Position.Line, Msg: "not valid YAML: " + msg + yamlHint(msg)}
		}
	}
	return Problem{Msg: "not valid YAML: " + err.Error() + yamlHint(err.Error())}
}

// yamlHint says what to do about the YAML mistakes a harness file's
// writer makes most: an unquoted {{placeholder}} (YAML reads "{" as a
// map), a tab in the indentation.
func yamlHint(msg string) string {
	switch {
	case strings.Contains(msg, "flow map"):
		return ` (a {{placeholder}} must be quoted: task: "{{input}}")`
	case strings.Contains(msg, "found character '\t'"):
		return " (indent with spaces: YAML does not take tabs)"
	}
	return ""
}

// compiled is the schema, compiled once per process on first use.
var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) { return engine.CompileSchema(schemaJSON()) })

// validate checks doc against the schema: one problem per rule broken,
// at the line of the key that breaks it.
func validate(doc any, tree *ast.File) []Problem {
	sch, err := compiled()
	if err != nil {
		return []Problem{{Msg: "the harness schema does not compile: " + err.Error()}}
	}
	// Through JSON: the validator reads JSON's types (float64 numbers,
	// map[string]any objects).
	b, err := json.Marshal(doc)
	if err != nil {
		return []Problem{{Msg: "keys must be strings: " + err.Error()}}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return []Problem{{Msg: err.Error()}}
	}
	res := sch.Validate(v)
	if res.IsValid() {
		return nil
	}
	seen := map[string]bool{}
	var out []Problem
	var walk func(l *jsonschema.List, at string)
	walk = func(l *jsonschema.List, at string) {
		if l == nil {
			return
		}
		// A detail's location is relative to its parent's.
		at += l.InstanceLocation
		for kw, msg := range l.Errors {
			p := Problem{Line: lineOf(tree, at), Field: pointerField(at)}
			switch {
			case kw == "schema" && strings.Contains(msg, "false"):
				// The key's own location under additionalProperties: false.
				p.Msg = "unknown key: " + known(at)
			case kw == "$ref" || kw == "properties" || kw == "items" || kw == "additionalProperties":
				continue // a summary of the errors below it
			default:
				p.Msg = explain(kw, msg)
			}
			if k := p.Field + "\x00" + p.Msg; !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
		for i := range l.Details {
			walk(&l.Details[i], at)
		}
	}
	walk(res.ToList(true), "")
	// A missing key is one problem, not also its absent value's.
	var kept []Problem
	for _, p := range out {
		dup := false
		for _, q := range out {
			if key, ok := strings.CutPrefix(q.Msg, "missing key "); ok && p.Field == strings.TrimPrefix(q.Field+"."+strings.TrimSuffix(key, ": add it"), ".") {
				dup = true
			}
		}
		if !dup {
			kept = append(kept, p)
		}
	}
	out = dedentedRoleKeys(doc, tree, kept)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

// dedentedRoleKeys reads a role named like a role's key (terminal,
// tools, max_turns…) that is no role as that key indented too little, out
// of the role above it: one problem saying so, in place of the schema's
// about what such a "role" lacks, which advised nesting it deeper still.
func dedentedRoleKeys(doc any, tree *ast.File, problems []Problem) []Problem {
	top, _ := doc.(map[string]any)
	roles, _ := top["roles"].(map[string]any)
	var s map[string]any
	_ = json.Unmarshal(schemaJSON(), &s)
	keys := propsAt(s, []string{"roles", "_"})
	out := problems
	for name := range roles {
		field := "roles." + name
		about := func(p Problem) bool { return p.Field == field || strings.HasPrefix(p.Field, field+".") }
		if !slices.Contains(keys, name) || !slices.ContainsFunc(out, about) {
			continue // a role may be called judge: one that is a role is one
		}
		out = slices.DeleteFunc(out, about)
		out = append(out, Problem{Line: lineOf(tree, "/roles/"+escape(name)), Field: field,
			Msg: fmt.Sprintf("%s is a role's key, not a role: indent it under the role it belongs to, as that role's system is", name)})
	}
	return out
}

// pointerField is a JSON pointer as a dotted key path.
func pointerField(ptr string) string {
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return strings.Join(segs, ".")
}

// lineOf is the line of the key (or list item) at a JSON pointer, or of
// its nearest ancestor's.
func lineOf(tree *ast.File, ptr string) int {
	var segs []string
	for _, s := range strings.Split(ptr, "/") {
		if s != "" {
			// A pointer writes "/" in a key as ~1 and "~" as ~0.
			segs = append(segs, strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~"))
		}
	}
	if len(tree.Docs) == 0 {
		return 0
	}
	// Walk down as far as the pointer goes, keeping the deepest line.
	node, best := tree.Docs[0].Body, 0
	for _, seg := range segs {
		key, value := child(node, seg)
		if key == nil {
			break
		}
		best, node = line(key), value
	}
	return best
}

// child is the entry seg names in node: a mapping's key (by its text,
// digits included) and its value, or a sequence's item (twice).
func child(node ast.Node, seg string) (key, value ast.Node) {
	var values []*ast.MappingValueNode
	switch n := node.(type) {
	case *ast.MappingNode:
		values = n.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{n}
	case *ast.SequenceNode:
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Values) {
			return n.Values[i], n.Values[i]
		}
		return nil, nil
	case *ast.TagNode:
		return child(n.Value, seg)
	case *ast.AnchorNode:
		return child(n.Value, seg)
	}
	for _, mv := range values {
		if tk := mv.Key.GetToken(); tk != nil && tk.Value == seg {
			return mv.Key, mv.Value
		}
	}
	return nil, nil
}

func line(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// explain turns a schema rule's message into what to do.
func explain(kw, msg string) string {
	switch kw {
	case "required":
		if _, rest, ok := strings.Cut(msg, "'"); ok {
			key, _, _ := strings.Cut(rest, "'")
			return "missing key " + key + ": add it"
		}
	case "pattern":
		if strings.Contains(msg, "(ms|s|m|h)") {
			return "not a duration: write 30s, 2m or 1m30s"
		}
	case "type":
		// "Value is integer but should be string": a number or a list
		// where text is asked is mostly a value to quote.
		if strings.HasSuffix(msg, "should be string") {
			return msg + `: quote it ("42"); a time is written 30s or 2m`
		}
		if strings.HasSuffix(msg, "should be integer") {
			return msg + ": write a whole number (e.g. 4)"
		}
	case "multipleOf":
		// "1000 should be a multiple of 256"
		var v, step float64
		if _, err := fmt.Sscanf(msg, "%g should be a multiple of %g", &v, &step); err == nil && step > 0 {
			return fmt.Sprintf("%s: use %g", msg, max(step, math.Round(v/step)*step))
		}
	}
	return msg
}

// known lists the keys allowed beside the unknown one at ptr.
func known(ptr string) string {
	var s map[string]any
	_ = json.Unmarshal(schemaJSON(), &s)
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	props := propsAt(s, segs[:len(segs)-1])
	if where := belongs(s, segs); where != "" {
		return where
	}
	if len(props) == 0 {
		return "remove it"
	}
	return "remove it, or use one of " + strings.Join(props, ", ")
}

// belongs says where a key found at the wrong level would be known: a
// level or more up (indented too far), or under one of its parent's keys
// (not indented enough); "" when neither.
func belongs(root map[string]any, segs []string) string {
	key, parent := segs[len(segs)-1], segs[:len(segs)-1]
	for k := len(parent) - 1; k >= 0; k-- {
		if slices.Contains(propsAt(root, parent[:k]), key) {
			where := "the top level"
			if k > 0 {
				where = strings.Join(parent[:k], ".")
			}
			return fmt.Sprintf("%s belongs to %s, not here: move it out (indent it as %s's other keys are)", key, where, where)
		}
	}
	for _, p := range propsAt(root, parent) {
		if slices.Contains(propsAt(root, append(slices.Clone(parent), p)), key) {
			return fmt.Sprintf("%s belongs under %s: move it there", key, strings.Join(append(slices.Clone(parent), p), "."))
		}
	}
	return ""
}

// propsAt follows a pointer's segments through the schema to the object
// schema there and lists its keys.
func propsAt(root map[string]any, segs []string) []string {
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			d, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			return d
		}
		return s
	}
	cur := root
	for _, seg := range segs {
		if seg == "" {
			continue
		}
		cur = resolve(cur)
		if props, ok := cur["properties"].(map[string]any); ok {
			if next, ok := props[seg].(map[string]any); ok {
				cur = next
				continue
			}
		}
		if items, ok := cur["items"].(map[string]any); ok {
			cur = items
			continue
		}
		if ap, ok := cur["additionalProperties"].(map[string]any); ok {
			cur = ap
			continue
		}
		return nil
	}
	cur = resolve(cur)
	props, _ := cur["properties"].(map[string]any)
	var out []string
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Rel resolves a path written in f relative to f's folder.
func (f *File) Rel(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(f.Path), p)
}

//go:embed starter.yaml
var starter []byte

// Starter is a commented harness file to start from (`lloyal harness
// init`).
func Starter() []byte { return bytes.Clone(starter) }

// WriteStarter writes Starter to path, never over an existing file.
func WriteStarter(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: lloyal harness init never overwrites a file; name another (lloyal harness init FILE)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(starter); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

//go:embed builtin
var builtins embed.FS

// BuiltinNames are the harness files built into lloyal.
func BuiltinNames() []string {
	entries, _ := builtins.ReadDir("builtin")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return out
}

// BuiltinText is the text of the built-in harness file name (e.g.
// "research").
func BuiltinText(name string) ([]byte, error) {
	b, err := builtins.ReadFile("builtin/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in harness %q: use one of %s", name, strings.Join(BuiltinNames(), ", "))
	}
	return b, nil
}

// Builtin is the built-in harness file name, as if it were name.yaml in
// the current folder: its relative paths (the notes folder) are the
// current folder's.
func Builtin(name string) (*File, error) {
	b, err := BuiltinText(name)
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", name, err)
	}
	return Parse(filepath.Join(wd, name+".yaml"), b)
}
