package chat

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine/chat/jinja"
)

// Think says whether a model that can reason first should: on and off are
// passed to templates that read enable_thinking; auto leaves it undefined so
// the template's own default holds.
type Think string

// Thinking switches.
const (
	ThinkAuto Think = "auto"
	ThinkOn   Think = "on"
	ThinkOff  Think = "off"
)

// ParseThink reads a --think value.
func ParseThink(s string) (Think, error) {
	switch Think(s) {
	case "", ThinkAuto:
		return ThinkAuto, nil
	case ThinkOn, ThinkOff:
		return Think(s), nil
	}
	return "", fmt.Errorf("--think %q: use on, off or auto", s)
}

// Template is a model's own Jinja chat template (tokenizer.chat_template),
// compiled once.
type Template struct {
	// Source is the template text.
	Source string
	// BOS and EOS are the texts of the model's bos_token and eos_token.
	BOS, EOS string
	// Name names the template in errors (a file, a model); empty, errors
	// name it by a hash of its source.
	Name string
	t    *jinja.Template
}

// NewTemplate compiles a chat template.
func NewTemplate(src, bos, eos string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		tm := &Template{Source: src}
		return nil, fmt.Errorf("%s: %w (fix the template or pass --template FILE)", tm.label(), err)
	}
	return &Template{Source: src, BOS: bos, EOS: eos, t: t}, nil
}

// label names the template in an error message.
func (t *Template) label() string {
	if t.Name != "" {
		return "chat template " + t.Name
	}
	sum := sha256.Sum256([]byte(t.Source))
	return "chat template (sha256 " + hex.EncodeToString(sum[:4]) + ")"
}

// exec renders the template with data. The engine recovers its own
// panics, and a panic anywhere on the way is turned into an error here
// too: no template may take the process down.
func (t *Template) exec(data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("%s: the template engine failed: %v", t.label(), r)
		}
	}()
	out, err = t.t.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.label(), err)
	}
	return out, nil
}

// Conversation is what a template renders.
type Conversation struct {
	Messages []Message
	// Tools is what the template sees as tools, as Hugging Face passes
	// them: nil is None (no tools given), an empty non-nil slice is []
	// (templates that test `tools is not none` tell them apart).
	Tools               []ToolSpec
	AddGenerationPrompt bool
	Think               Think
}

// transform is what a template did to a content string on its way into the
// prompt, found by comparing a render of the real strings with a render of
// sentinels (see Template.Render).
type transform int

const (
	asIs transform = iota
	trimmed
	leftTrimmed
	rightTrimmed
	jsonEscaped
	jsonTrimmed
)

// transforms in the order they are tried.
var transforms = []transform{asIs, trimmed, leftTrimmed, rightTrimmed, jsonEscaped, jsonTrimmed}

func (x transform) apply(s string) string {
	switch x {
	case trimmed:
		return strings.TrimFunc(s, jinja.IsSpace)
	case leftTrimmed:
		return strings.TrimLeftFunc(s, jinja.IsSpace)
	case rightTrimmed:
		return strings.TrimRightFunc(s, jinja.IsSpace)
	case jsonEscaped:
		return jsonInner(s)
	case jsonTrimmed:
		return jsonInner(strings.TrimFunc(s, jinja.IsSpace))
	}
	return s
}

// jsonInner is s as a JSON string literal without its quotes, escaped as
// Python's json.dumps(ensure_ascii=False) and the template's tojson do.
func jsonInner(s string) string {
	q := jinja.JSONString(s)
	return q[1 : len(q)-1]
}

// piece is a run of rendered text; content pieces name the string they came
// from (ref, an index into the strings the sentinels stood for) and what the
// template did to it.
type piece struct {
	text    string
	special bool
	ref     int
	xf      transform
}

type pieces []piece

func (ps pieces) prompt() Prompt {
	var p Prompt
	for _, x := range ps {
		if x.text == "" {
			continue
		}
		p = append(p, Segment{Text: x.text, Special: x.special})
	}
	return p
}

// Render renders a conversation as the template does, as segments: the
// template's own text is special, every content string (message contents,
// reasoning, tool-call arguments, tool and parameter descriptions) is content.
// The text is byte for byte what the template renders for the real strings.
//
// It renders twice: once with the real strings and once with a unique
// sentinel in place of each, then walks both renders together. Where the
// template trims a string or writes it through tojson, the walk finds that
// form; a template that rewrites content some other way is an error, because
// its markers could no longer be told from content.
func (t *Template) Render(c Conversation) (Prompt, error) {
	ps, _, err := t.render(c)
	if err != nil {
		return nil, err
	}
	return ps.prompt(), nil
}

// Text renders a conversation as plain text (what Python's jinja2 renders).
func (t *Template) Text(c Conversation) (string, error) {
	return t.exec(t.data(c, nil))
}

func (t *Template) render(c Conversation) (pieces, []string, error) {
	real, err := t.exec(t.data(c, nil))
	if err != nil {
		return nil, nil, err
	}
	var nonce [6]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, nil, err
	}
	s := &sentinels{prefix: "LLOYAL" + hex.EncodeToString(nonce[:])}
	// The first pass only collects the content strings; the sentinels
	// are then numbered in the strings' own sort order, so the second
	// pass's sentinels sort as the real strings do.
	t.data(c, s)
	s.number()
	marked, err := t.exec(t.data(c, s))
	if err != nil {
		return nil, nil, err
	}
	ps, err := align(real, marked, s.prefix, s.strings)
	return ps, s.strings, err
}

// align walks the real render along the sentinel render: the text between
// sentinels must appear verbatim in the real render, and each sentinel must
// stand for its string in one of the forms templates write content in.
func align(real, marked, prefix string, strs []string) (pieces, error) {
	// Only this render's nonce marks a sentinel: text that imitates one
	// (a tool's name) is template text like any other.
	re := regexp.MustCompile(regexp.QuoteMeta(prefix) + `S([0-9]+)E`)
	locs := re.FindAllStringSubmatchIndex(marked, -1)
	var between []string
	var refs []int
	last := 0
	for _, l := range locs {
		between = append(between, marked[last:l[0]])
		n, _ := strconv.Atoi(marked[l[2]:l[3]])
		if n >= len(strs) {
			return nil, errors.New("chat template: a content sentinel was rewritten")
		}
		refs = append(refs, n)
		last = l[1]
	}
	between = append(between, marked[last:])
	var out pieces
	pos := 0
	for i, text := range between {
		if !strings.HasPrefix(real[pos:], text) {
			return nil, fmt.Errorf("chat template: the template renders differently around content (near %q): it branches on or rewrites message text, which lloyal cannot keep apart from its markers", Clip(text, 40))
		}
		out = append(out, piece{text: text, special: true, ref: -1})
		pos += len(text)
		if i == len(refs) {
			break
		}
		next := between[i+1]
		s := strs[refs[i]]
		found := false
		for _, x := range transforms {
			v := x.apply(s)
			if strings.HasPrefix(real[pos:], v) && strings.HasPrefix(real[pos+len(v):], next) {
				out = append(out, piece{text: v, ref: refs[i], xf: x})
				pos += len(v)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("chat template: the template rewrites a content string (%q) in a way lloyal cannot follow", Clip(s, 40))
		}
	}
	if pos != len(real) {
		return nil, errors.New("chat template: the render with sentinels is shorter than the real one")
	}
	return out, nil
}

// Clip is s cut to at most n characters (runes, so a character is never
// split), with "…" where it was cut: for error messages, summaries and
// previews.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// sentinels hands out a stand-in for each content string. Equal strings get
// the same stand-in, so a template that compares them (a property name
// against a schema's "required" list) branches as it does on the real ones.
//
// The stand-ins sort as the strings they stand for: numbered in the order
// jinja2's sort, dictsort and unique put strings (case-insensitively, then
// by code point) with numbers of one width, so a template that sorts
// content (dictsort over a schema's properties) walks the sentinels in the
// same order as the real strings, and its render lines up with the real
// one. Numbering needs every string first: a collecting pass (index nil
// until number) records them, and number assigns the numbers.
type sentinels struct {
	prefix  string
	strings []string        // by number, once numbered
	seen    map[string]bool // the collecting pass's strings
	index   map[string]int
	format  string
}

func (s *sentinels) of(v string) string {
	if s == nil || v == "" {
		return v
	}
	if s.index == nil {
		if s.seen == nil {
			s.seen = map[string]bool{}
		}
		s.seen[v] = true
		return v
	}
	n, ok := s.index[v]
	if !ok {
		// Not seen while collecting (data is deterministic, so this
		// cannot happen); still a distinct sentinel, numbered last.
		s.strings = append(s.strings, v)
		n = len(s.strings) - 1
		s.index[v] = n
	}
	return fmt.Sprintf(s.format, s.prefix, n)
}

// number numbers the collected strings in sort order.
func (s *sentinels) number() {
	s.strings = s.strings[:0]
	for v := range s.seen {
		s.strings = append(s.strings, v)
	}
	sort.Slice(s.strings, func(i, j int) bool {
		a, b := strings.ToLower(s.strings[i]), strings.ToLower(s.strings[j])
		if a != b {
			return a < b
		}
		return s.strings[i] < s.strings[j]
	})
	s.index = make(map[string]int, len(s.strings))
	for i, v := range s.strings {
		s.index[v] = i
	}
	s.format = "%sS%0" + strconv.Itoa(len(strconv.Itoa(len(s.strings)+1))) + "dE"
}

// data is the template's input, in the shape Hugging Face's
// apply_chat_template passes: OpenAI-style messages and tools, key order
// kept. With s, every content string is replaced by a sentinel.
func (t *Template) data(c Conversation, s *sentinels) map[string]jinja.Value {
	msgs := make([]jinja.Value, 0, len(c.Messages))
	for _, m := range c.Messages {
		msgs = append(msgs, messageValue(m, s))
	}
	d := map[string]jinja.Value{
		"messages":              jinja.NewList(msgs),
		"add_generation_prompt": jinja.NewBool(c.AddGenerationPrompt),
		"bos_token":             jinja.NewString(t.BOS),
		"eos_token":             jinja.NewString(t.EOS),
		"tools":                 jinja.None(),
	}
	if c.Tools != nil {
		ts := []jinja.Value{}
		for _, tool := range c.Tools {
			ts = append(ts, toolValue(tool, s))
		}
		d["tools"] = jinja.NewList(ts)
	}
	switch c.Think {
	case ThinkOn:
		d["enable_thinking"] = jinja.NewBool(true)
	case ThinkOff:
		d["enable_thinking"] = jinja.NewBool(false)
	}
	return d
}

func messageValue(m Message, s *sentinels) jinja.Value {
	d := jinja.NewDict()
	dd := d.AsDict()
	dd.Set("role", jinja.NewString(string(m.Role)))
	dd.Set("content", jinja.NewString(s.of(m.Content)))
	if m.Reasoning != "" {
		dd.Set("reasoning_content", jinja.NewString(s.of(m.Reasoning)))
	}
	if len(m.Calls) > 0 {
		var calls []jinja.Value
		for _, c := range m.Calls {
			fn := jinja.NewDict()
			// A call's name is what the model wrote: content.
			fn.AsDict().Set("name", jinja.NewString(s.of(c.Name)))
			args := c.Arguments
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			fn.AsDict().Set("arguments", jsonValue(args, s, true))
			call := jinja.NewDict()
			if c.ID != "" {
				call.AsDict().Set("id", jinja.NewString(c.ID))
			}
			call.AsDict().Set("type", jinja.NewString("function"))
			call.AsDict().Set("function", fn)
			calls = append(calls, call)
		}
		dd.Set("tool_calls", jinja.NewList(calls))
	}
	if m.CallID != "" {
		dd.Set("tool_call_id", jinja.NewString(m.CallID))
	}
	if m.Name != "" {
		// A tool result's name is free text some templates show (harmony's
		// "functions.NAME"); the runtime fills it per call.
		dd.Set("name", jinja.NewString(s.of(m.Name)))
	}
	return d
}

func toolValue(t ToolSpec, s *sentinels) jinja.Value {
	fn := jinja.NewDict()
	// A tool's name comes from its author (an MCP server, a config
	// file): content, so a name that spells a marker stays text.
	fn.AsDict().Set("name", jinja.NewString(s.of(t.Name)))
	if t.Description != "" {
		fn.AsDict().Set("description", jinja.NewString(s.of(t.Description)))
	}
	params := t.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	fn.AsDict().Set("parameters", jsonValue(params, s, false))
	d := jinja.NewDict()
	d.AsDict().Set("type", jinja.NewString("function"))
	d.AsDict().Set("function", fn)
	return d
}

// jsonValue converts JSON to a template value, keeping key order (Python's
// json.loads does; templates that write a schema with tojson show it). With
// s, free text becomes sentinels: every string of a call's arguments (all);
// of a schema every string but a "type" value (templates branch on it), and
// every key but the JSON Schema keywords templates look up ("properties",
// "required", …) — property names, enum values, titles, defaults and unknown
// keys all come from the tool's author and must stay content.
func jsonValue(raw json.RawMessage, s *sentinels, allStrings bool) jinja.Value {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, s, allStrings, "", "")
	if err != nil {
		return jinja.NewString(s.of(string(raw)))
	}
	return v
}

// schemaKeywords are the JSON Schema keywords kept as template text where
// they are keys of a schema (not names in a map of properties).
var schemaKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "items": true, "enum": true,
	"description": true, "title": true, "default": true, "const": true, "format": true,
	"pattern": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "minLength": true, "maxLength": true, "minItems": true,
	"maxItems": true, "uniqueItems": true, "additionalProperties": true,
	"patternProperties": true, "anyOf": true, "oneOf": true, "allOf": true, "not": true,
	"$ref": true, "$defs": true, "definitions": true, "$schema": true, "$id": true,
	"examples": true, "nullable": true, "multipleOf": true, "minProperties": true,
	"maxProperties": true, "prefixItems": true, "contains": true, "if": true,
	"then": true, "else": true, "dependentRequired": true, "dependentSchemas": true,
	"propertyNames": true, "unevaluatedProperties": true, "unevaluatedItems": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "contentMediaType": true,
	"contentEncoding": true,
}

// nameMaps are the schema keywords whose object's keys are names chosen by
// the schema's author.
var nameMaps = map[string]bool{
	"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependentRequired": true,
}

// decodeValue decodes one JSON value; key is the key it is the value of
// (inherited by an array's items) and parent the key of the object holding
// it.
func decodeValue(dec *json.Decoder, s *sentinels, all bool, key, parent string) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, s, all, k, key)
				if err != nil {
					return jinja.Value{}, err
				}
				name := k
				if all || nameMaps[key] || !schemaKeywords[k] {
					name = s.of(k)
				}
				d.AsDict().Set(name, v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec, s, all, key, parent)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
	case string:
		// A "type" value is structure, unless "type" is itself a
		// property's name.
		if !all && key == "type" && !nameMaps[parent] {
			return jinja.NewString(x), nil
		}
		return jinja.NewString(s.of(x)), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return jinja.NewInt(i), nil
		}
		f, _ := x.Float64()
		return jinja.NewFloat(f), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}
