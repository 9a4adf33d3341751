package engine_test

import (
	"strings"
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
