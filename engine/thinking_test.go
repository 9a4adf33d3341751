package engine_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// thinkingTemplate is a ChatML template that reads enable_thinking as
// Qwen3's does: off opens an empty think block after the generation prompt.
const thinkingTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`

// TestPoolThinkingSwitch: PoolSpec.Thinking reaches the model's template —
// a pool with thinking off gives each agent the empty think block, one
// without a setting does not, on the same backend.
func TestPoolThinkingSwitch(t *testing.T) {
	tm, err := chat.NewTemplate(thinkingTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := chat.FromTemplate(tm, chat.ThinkAuto)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		think chat.Think
		want  bool
	}{{"", false}, {chat.ThinkOn, false}, {chat.ThinkOff, true}} {
		t.Run(string(tt.think), func(t *testing.T) {
			h := newHarness(t, 4096, engine.Options{})
			h.be.SetFormat(f)
			h.be.Script("lighthouse question", reportCall("done"))
			res := h.run(engine.PoolSpec{System: "You research.", Terminal: report, Thinking: tt.think,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lighthouse question"})})
			if a := byTask(res, "lighthouse question"); a.Outcome != event.Returned {
				t.Fatalf("agent: %+v", a)
			}
			got := false
			for _, in := range h.be.Inputs() {
				if strings.Contains(in, "lighthouse question") {
					got = strings.HasSuffix(in, "<|im_start|>assistant\n<think>\n\n</think>\n\n")
					if !tt.want && !strings.HasSuffix(in, "<|im_start|>assistant\n") {
						t.Fatalf("the agent's prompt does not end with the generation prompt: %q", in)
					}
				}
			}
			if got != tt.want {
				t.Fatalf("thinking %q: empty think block after the generation prompt = %v, want %v; inputs %q", tt.think, got, tt.want, h.be.Inputs())
			}
		})
	}
}

// TestToolResultCarriesToolName: where a template names a result's sender
// (harmony's functions.NAME), the runtime writes the tool's name there.
func TestToolResultCarriesToolName(t *testing.T) {
	f := engine.HarmonyFormat(t)
	var n atomic.Int32
	h := newHarness(t, 8192, engine.Options{})
	h.be.SetFormat(f)
	h.be.Script("lighthouse question",
		f.RenderCall(chat.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"term": "spine"}`)}),
		f.RenderCall(chat.ToolCall{Name: "report", Arguments: json.RawMessage(`{"result": "found"}`)}))
	res := h.run(engine.PoolSpec{System: "You research.", Tools: []engine.Tool{lookup(&n)}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lighthouse question"})})
	if a := byTask(res, "lighthouse question"); a.Outcome != event.Returned || n.Load() != 1 {
		t.Fatalf("agent: %+v, lookup ran %d times", a, n.Load())
	}
	found := false
	for _, in := range h.be.Inputs() {
		if strings.Contains(in, "the meaning of spine") {
			found = strings.Contains(in, "<|call|><|start|>functions.lookup to=assistant<|channel|>commentary<|message|>")
		}
	}
	if !found {
		t.Fatalf("the tool result does not name its tool: %q", h.be.Inputs())
	}
}

// spineThinkingTemplate shows the thinking switch in the system turn too, so
// the spine a pool writes says which switch it was rendered with.
const spineThinkingTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == "system" and enable_thinking is defined %}[think {{ enable_thinking }}]
{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}`

// TestPoolThinkingKeepsBackendSetting: a pool that sets no thinking switch
// renders with the backend's (lloyal run --think off), in its agents' turns
// and in its spine; a pool that sets one renders its spine with it too.
func TestPoolThinkingKeepsBackendSetting(t *testing.T) {
	tm, err := chat.NewTemplate(spineThinkingTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := chat.FromTemplate(tm, chat.ThinkOff)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		think     chat.Think
		spine     string
		emptyTurn bool
	}{{"", "[think False]", true}, {chat.ThinkOn, "[think True]", false}} {
		t.Run(string(tt.think), func(t *testing.T) {
			h := newHarness(t, 4096, engine.Options{})
			h.be.SetFormat(f)
			h.be.Script("lighthouse question", reportCall("done"))
			res := h.run(engine.PoolSpec{System: "You research.", Terminal: report, Thinking: tt.think,
				Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lighthouse question"})})
			if a := byTask(res, "lighthouse question"); a.Outcome != event.Returned {
				t.Fatalf("agent: %+v", a)
			}
			spine, turn := false, false
			for _, in := range h.be.Inputs() {
				if strings.Contains(in, "You research.") {
					spine = strings.Contains(in, tt.spine)
				}
				if strings.Contains(in, "lighthouse question") {
					turn = strings.HasSuffix(in, "<|im_start|>assistant\n<think>\n\n</think>\n\n")
				}
			}
			if !spine || turn != tt.emptyTurn {
				t.Fatalf("pool thinking %q on a backend with thinking off: spine shows %s = %v, empty think block = %v (want %v); inputs %q", tt.think, tt.spine, spine, turn, tt.emptyTurn, h.be.Inputs())
			}
		})
	}
}
