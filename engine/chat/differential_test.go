package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
)

// sharedTemplates is the folder of published models' chat templates named
// by LLOYAL_TEST_TEMPLATES (e.g. ../shared/templates), or skips the test.
func sharedTemplates(tb testing.TB) map[string]string {
	tb.Helper()
	dir := os.Getenv("LLOYAL_TEST_TEMPLATES")
	if dir == "" {
		tb.Skip("LLOYAL_TEST_TEMPLATES is not set: set it to a folder of real chat templates (e.g. ../shared/templates) to run this test")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(paths) == 0 {
		tb.Skipf("LLOYAL_TEST_TEMPLATES=%s holds no *.jinja templates", dir)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	return out
}

// diffConversation is one of the conversations every shared template is
// rendered in: messages and tools as JSON files of testdata/conversations
// (tools "" for none, so the template sees None; "empty_tools" is []).
type diffConversation struct {
	name, messages, tools string
}

var diffConversations = []diffConversation{
	{"multi-turn with tools", "multiturn_tools", "tools"},
	{"chat with tools", "chat", "tools"},
	{"chat with an empty tool list", "chat", "empty_tools"},
	{"chat without tools", "chat", ""},
}

// load reads the conversation as lloyal parses it and as raw JSON for
// jinja2.
func (c diffConversation) load(tb testing.TB) (Conversation, json.RawMessage, json.RawMessage) {
	tb.Helper()
	msgs := mustRead(tb, filepath.Join("testdata", "conversations", c.messages+".json"))
	m, err := ParseMessages(msgs)
	if err != nil {
		tb.Fatal(err)
	}
	conv := Conversation{Messages: m, AddGenerationPrompt: true, Think: ThinkAuto}
	var tools json.RawMessage
	if c.tools != "" {
		tools = mustRead(tb, filepath.Join("testdata", "conversations", c.tools+".json"))
		if conv.Tools, err = ParseTools(tools); err != nil {
			tb.Fatal(err)
		}
	}
	return conv, msgs, tools
}

// safely runs f, turning a panic that escapes lloyal's own recover into an
// error the test reports (with its stack) rather than a crash of the run.
func safely(f func() error) (panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked, err = true, fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return false, f()
}

// TestSharedTemplatesMatchJinja2 renders every published template in
// LLOYAL_TEST_TEMPLATES in four conversations with lloyal and with Python's
// jinja2 under Hugging Face's settings: wherever jinja2 renders, lloyal's
// segmented render must be the same bytes; wherever jinja2 raises, lloyal
// must refuse too; and nothing — render, probe or spine — may panic.
func TestSharedTemplatesMatchJinja2(t *testing.T) {
	templates := sharedTemplates(t)
	j := startJinja2(t)
	names := make([]string, 0, len(templates))
	for n := range templates {
		names = append(names, n)
	}
	sort.Strings(names)
	const bos, eos = "<s>", "</s>"
	var renders, matches, raises, refusals, panics int
	for _, name := range names {
		src := templates[name]
		t.Run(name, func(t *testing.T) {
			var tm *Template
			panicked, err := safely(func() (err error) {
				tm, err = NewTemplate(src, bos, eos)
				return err
			})
			if panicked {
				panics++
				t.Fatalf("NewTemplate panicked: %v", err)
			}
			for _, c := range diffConversations {
				conv, msgs, tools := c.load(t)
				want, err := j.render(jinja2Request{Template: src, Messages: msgs, Tools: tools, Think: ThinkAuto, BOS: bos, EOS: eos, AddGenerationPrompt: true})
				if err != nil {
					t.Fatal(err)
				}
				var got Prompt
				var rerr error
				if tm == nil {
					rerr = errors.New("does not compile")
				} else if panicked, rerr = safely(func() (err error) { got, err = tm.Render(conv); return err }); panicked {
					panics++
				}
				switch {
				case want.Text != nil:
					renders++
					if rerr != nil {
						t.Errorf("%s: jinja2 renders, lloyal fails: %v", c.name, rerr)
					} else if got.String() != *want.Text {
						t.Errorf("%s: lloyal's render differs from jinja2's at byte %d:\n got: %q\nwant: %q", c.name, firstDiff(got.String(), *want.Text), got.String(), *want.Text)
					} else {
						matches++
					}
				default:
					raises++
					if rerr == nil {
						t.Errorf("%s: jinja2 raises (%s), lloyal renders %q", c.name, want.Error, Clip(got.String(), 200))
					} else {
						refusals++
					}
				}
			}
			if tm == nil {
				return
			}
			// lloyal's own probe renders and the spine (with a tool) must
			// not take the process down either; a template lloyal cannot
			// cut into turns is refused with a reason, which is fine here.
			for _, think := range []Think{ThinkAuto, ThinkOn, ThinkOff} {
				if panicked, err := safely(func() error {
					f, err := FromTemplate(tm, think)
					if err == nil {
						_, _ = f.Spine("sys", []ToolSpec{{Name: "search", Description: "find", Parameters: json.RawMessage(`{"type":"object"}`)}})
					}
					return nil
				}); panicked {
					panics++
					t.Errorf("think %s: probing the template panicked: %v", think, err)
				}
			}
		})
	}
	t.Logf("%d templates × %d conversations: jinja2 renders %d, lloyal matches %d byte for byte; jinja2 raises %d, lloyal refuses %d of them; %d panics",
		len(names), len(diffConversations), renders, matches, raises, refusals, panics)
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// roleMapTemplates spell their roles through a mapping rather than by
// quoted name in a test, as published templates do (EXAONE 4's role
// indicators, GLM's observation turn, Gemma's "model"): the tool's turn
// is found only by rendering it. Each is written for this test.
var roleMapTemplates = map[string]string{
	// The roles' markers are a dict literal's values, looked up by role.
	"dict subscript": `{%- set role_map = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"} -%}
{%- if tools %}<|tools|>{% for t in tools %}{{ t | tojson }}
{% endfor %}<|end|>{% endif -%}
{%- for m in messages -%}
{{ role_map[m.role] }}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|end|>
{%- endfor -%}
{%- if add_generation_prompt %}{{ role_map["assistant"] }}{% endif %}`,
	// The marker is built around a mapped name; the tool's is "observation".
	"concatenated name": `{%- set roles = {'system': 'system', 'user': 'user', 'assistant': 'assistant', 'tool': 'observation'} -%}
{%- for message in messages -%}
{{ '<|' + roles[message['role']] + '|>' }}
{%- if loop.first and tools %}{{ tools | tojson }}
{% endif -%}
{%- for c in message.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor -%}
{{ message['content'] }}
{%- endfor -%}
{%- if add_generation_prompt %}<|assistant|>{% endif %}`,
	// Only the assistant is renamed: every other role, the tool's
	// included, is written as given and never named.
	"get with the role as default": `{%- set renamed = dict(assistant="model") -%}
{%- for m in messages -%}
<start_of_turn>{{ renamed.get(m.role, m.role) }}
{% if loop.first and tools %}{% for t in tools %}{{ t.function.name }}: {{ t.function.description }}
{% endfor %}{% endif -%}
{% for c in m.tool_calls or [] %}CALL {{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}{{ m.content | trim }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt %}<start_of_turn>{{ renamed.assistant }}
{% endif %}`,
}

// TestRoleMapTemplatesMatchJinja2: a template that spells its tool role
// through a mapping keeps its own tool turn — lloyal's prompt for every
// conversation (the one the runtime writes, not only the template's bare
// render) is jinja2's, byte for byte, and no probe judges that it has no
// tool role and sends results as user messages.
func TestRoleMapTemplatesMatchJinja2(t *testing.T) {
	j := startJinja2(t)
	srcs := maps.Clone(roleMapTemplates)
	srcs["testdata rolemap"] = string(mustRead(t, filepath.Join("testdata", "templates", "rolemap.jinja")))
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		src := srcs[name]
		t.Run(name, func(t *testing.T) {
			tm, err := NewTemplate(src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			f, err := FromTemplate(tm, ThinkAuto)
			if err != nil {
				t.Fatal(err)
			}
			if f.pat.toolAsUser {
				t.Fatalf("judged to have no tool role: %s", f.Notes)
			}
			for _, c := range diffConversations {
				conv, msgs, tools := c.load(t)
				want, err := j.render(jinja2Request{Template: src, Messages: msgs, Tools: tools, Think: ThinkAuto, AddGenerationPrompt: true})
				if err != nil {
					t.Fatal(err)
				}
				if want.Text == nil {
					t.Fatalf("%s: jinja2 raises (%s): the template is meant to render every conversation", c.name, want.Error)
				}
				got, _, err := f.Conversation(conv.Messages, conv.Tools, true)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got.String() != *want.Text {
					t.Errorf("%s: lloyal's prompt differs from jinja2's at byte %d:\n got: %q\nwant: %q", c.name, firstDiff(got.String(), *want.Text), got.String(), *want.Text)
				}
			}
		})
	}
}
