package llamabackend

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/fold"
)

// Forced gives the tokens the model's tokenizer makes of the text the
// grammar forces, less the last unless only the end may follow: whatever
// the model then writes, its own tokenization of the whole text after a
// line of its own starts with them. They are accepted by the branch's
// sampler (the grammar moved past them), and max bounds them. On a
// SentencePiece vocabulary (phi-3's, which puts a space before a
// sequence's first word) as on the tiny model's.
func TestForcedTokensAreTheModelsOwn(t *testing.T) {
	backends := map[string]func(t *testing.T) *Backend{
		"tiny": func(t *testing.T) *Backend { return open(t, 2048) },
		"phi-3 vocabulary": func(t *testing.T) *Backend {
			m, err := model.Open(tinyPhi3(t), model.Options{})
			must(t, err)
			be, err := New(m, ContextOptions{NCtx: 2048, NBatch: 256, NSeqMax: 8, NThreads: 1})
			if err != nil {
				m.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close(); m.Close() })
			return be
		},
	}
	const opening = `{"name": "`
	for vocab, open := range backends {
		for _, c := range []struct {
			name    string
			gbnf    string
			max     int
			forced  string   // the grammar's forced text
			ends    bool     // nothing may follow it
			follows []string // what the model may write next
		}{
			{"a call's opening", `root ::= "{\"name\": \"" ("search" | "read_file") "\"}"`, 64, opening, false, []string{`search"}`, `read_file"}`}},
			{"a whole forced text", `root ::= "{\"answer\": \"the harbor\"}"`, 64, `{"answer": "the harbor"}`, true, []string{""}},
			{"at most max", `root ::= "{\"answer\": \"the harbor\"}"`, 2, `{"answer": "the harbor"}`, true, []string{""}},
			// phi-3's <|assistant|> is a control token: the model writes it
			// as one token, as a chat format's call marker is written.
			{"a special token as itself", `root ::= "{\"a\": 1}<|assistant|>"`, 64, `{"a": 1}<|assistant|>`, true, []string{""}},
		} {
			t.Run(vocab+"/"+c.name, func(t *testing.T) {
				be := open(t)
				m := be.Model()
				b, err := be.Create()
				if err != nil {
					t.Fatal(err)
				}
				defer be.Prune(b)
				prompt, _ := m.Tokenize("Call a tool.", true, false)
				if err := be.Prefill([]engine.Span{{Branch: b, Tokens: prompt}}); err != nil {
					t.Fatal(err)
				}
				if err := be.SetSampling(b, engine.Sampling{Grammar: &chat.Grammar{GBNF: c.gbnf}, JumpForward: true}); err != nil {
					t.Fatal(err)
				}
				toks := be.Forced(b, c.max)
				if len(toks) == 0 {
					t.Fatal("nothing forced")
				}
				var text string
				for _, tok := range toks {
					text += string(m.Piece(tok))
				}
				if special, ok := m.TokenByText("<|assistant|>"); ok && strings.HasSuffix(c.forced, "<|assistant|>") && toks[len(toks)-1] != special {
					t.Fatalf("forced %v: the marker is not its one token %d", toks, special)
				}
				own := afterALine(t, m, c.forced)
				switch {
				case c.max < len(own) && len(toks) != c.max:
					t.Fatalf("%d tokens forced, max %d", len(toks), c.max)
				case c.max >= len(own) && c.ends && text != c.forced:
					t.Fatalf("forced %q, want all of %q", text, c.forced)
				case !c.ends && (!strings.HasPrefix(c.forced, text) || len(toks) != len(own)-1):
					t.Fatalf("forced %q (%d tokens), want %q less its last of %d tokens", text, len(toks), c.forced, len(own))
				}
				for _, f := range c.follows {
					whole := afterALine(t, m, c.forced+f)
					if !slices.Equal(whole[:min(len(toks), len(whole))], toks) {
						t.Errorf("the model tokenizes %q as %v: it does not start with the forced %v", c.forced+f, whole, toks)
					}
				}
				// The sampler moved past them: what is forced now is the rest.
				br, _ := be.branch(b)
				rest, _ := br.ForcedText(256)
				if !c.ends && rest != strings.TrimPrefix(c.forced, text) {
					t.Fatalf("after forcing %q the grammar forces %q", text, rest)
				}
			})
		}
	}
}

// afterALine is how m tokenizes text in the middle of a sequence: after a
// line of text, whose tokens are dropped.
func afterALine(t *testing.T, m *model.Model, text string) []engine.Token {
	t.Helper()
	const line = "Call a tool.\n"
	toks, err := m.Tokenize(line+text, false, true)
	must(t, err)
	var head string
	for k, tok := range toks {
		head += string(m.Piece(tok))
		if strings.TrimPrefix(head, " ") == line {
			return toks[k+1:]
		}
	}
	t.Fatalf("no token ends at the line's end in %v", toks)
	return nil
}

// A run with jump-forward writes, in one tick, the text its report's
// grammar forces: its ticks forced tokens, each agent's turn ids spell its
// text, and the report still validates.
func TestJumpForwardInARun(t *testing.T) {
	for _, jump := range []bool{false, true} {
		be := open(t, 4096)
		rec := &engine.Recorder{}
		res := runReporters(t, be, engine.Options{Sinks: []engine.Sink{rec}}, engine.PoolSpec{MaxTurns: 2, MaxTurnTokens: 256,
			Sampling:    engine.Sampling{Temperature: 0.8, Seed: 3, JumpForward: jump},
			Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What is a spine?"}, engine.AgentSpec{Task: "What is a branch?"})})
		forced := 0
		for _, e := range rec.Of(event.PoolTick) {
			for _, n := range e.Forced {
				forced += n
			}
		}
		if jump != (forced > 0) {
			t.Fatalf("jump-forward %v: %d tokens forced", jump, forced)
		}
		// The screen's fold counts every token an agent wrote, forced too.
		st := fold.NewState()
		for _, e := range rec.Events() {
			st.Apply(e)
		}
		for _, a := range res.Agents {
			if a.Outcome != event.Returned {
				t.Fatalf("jump-forward %v: agent %d did not return: %+v", jump, a.ID, a)
			}
			if got := st.Agents[a.ID].Tokens; got != a.Tokens {
				t.Fatalf("jump-forward %v: the fold counts %d tokens for agent %d, it wrote %d", jump, got, a.ID, a.Tokens)
			}
		}
		for _, e := range rec.Of(event.AgentTurn) {
			var spelt string
			for _, id := range e.IDs {
				if !be.IsStop(id) {
					spelt += string(be.Piece(id))
				}
			}
			if strings.ToValidUTF8(spelt, "\uFFFD") != e.Text {
				t.Fatalf("jump-forward %v: agent %d's turn ids spell %q, its text is %q", jump, e.Agent, spelt, e.Text)
			}
		}
		t.Logf("jump-forward %v: %d ticks, %d tokens, %d forced", jump, res.Steps, res.TotalTokens, forced)
	}
}

// Text written forward counts against the turn's token limit: no turn
// passes MaxTurnTokens because a grammar forced a long run at its end.
func TestJumpForwardKeepsTheTurnLimit(t *testing.T) {
	be := open(t, 4096)
	rec := &engine.Recorder{}
	rt := engine.New(be, engine.Options{Sinks: []engine.Sink{rec}})
	answer := engine.Terminal("answer", "Answer.", []byte(`{"type":"object","properties":{"text":{"enum":["a spine is the prompt every agent shares in the cache"]}},"required":["text"]}`))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spine, err := rt.NewSpine(ctx, "Answer.", nil, answer)
	if err != nil {
		t.Fatal(err)
	}
	defer spine.Close()
	const limit = 30
	if _, err := rt.Run(ctx, engine.PoolSpec{Spine: spine, MaxTurns: 1, MaxTurnTokens: limit, ToolChoice: engine.ToolRequired,
		Sampling:    engine.Sampling{Temperature: 0.8, Seed: 3, JumpForward: true},
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What is a spine?"})}); err != nil {
		t.Fatal(err)
	}
	forced := 0
	for _, e := range rec.Of(event.PoolTick) {
		for _, n := range e.Forced {
			forced += n
		}
	}
	for _, e := range rec.Of(event.AgentTurn) {
		if e.Role == "" && e.Tokens > limit {
			t.Fatalf("a turn of %d tokens, the limit is %d", e.Tokens, limit)
		}
	}
	if forced == 0 {
		t.Fatal("nothing was forced: the test would not notice")
	}
}

// A run on a context with a stream per branch: agents forked from the spine
// (each fork a copy of it) run to their reports as in a shared cache. The
// pressure limits are a stream's: the defaults (1,024 and 512 cells) would
// leave a 1,024-cell stream no room to start in.
func TestAgentsRunOnStreams(t *testing.T) {
	be := openWith(t, ContextOptions{NCtx: 4 * 1024, NBatch: 256, NSeqMax: 4, NThreads: 1, Streams: true})
	res := runReporters(t, be, engine.Options{}, engine.PoolSpec{MaxTurns: 2, MaxTurnTokens: 256, SoftLimit: 384, HardLimit: 256,
		Sampling:    engine.Sampling{Temperature: 0.8, Seed: 3, JumpForward: true},
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "What is a spine?"}, engine.AgentSpec{Task: "What is a branch?"}, engine.AgentSpec{Task: "What is a stream?"})})
	for _, a := range res.Agents {
		if a.Outcome != event.Returned {
			t.Fatalf("agent %d did not return: %+v", a.ID, a)
		}
	}
	if a := be.Store().Attention(); a.MaxAttended > be.Store().Context().NCtxSeq() {
		t.Fatalf("a decode attended %d cells, more than one stream's %d", a.MaxAttended, be.Store().Context().NCtxSeq())
	}
}
