package llamabackend

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/kaptinlin/jsonschema"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// These tests meet models nobody on this project wrote. They run when
// LLOYAL_TEST_MODELS names a folder holding them (CI sets it).

func openShared(t *testing.T, name string, o model.Options) *testModel {
	t.Helper()
	p := filepath.Join(testmodel.SharedModels(t), name)
	m, err := openModel(p, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestSharedStoriesGenerates(t *testing.T) {
	m := openShared(t, "stories260K.gguf", model.Options{})
	if m.Format.Kind != chat.Generic {
		t.Fatalf("a model without a chat template should fall back to generic, got %s", m.Format.Kind)
	}
	s := newStore(t, m, 512)
	toks, err := m.Tokenize("Once upon a time", true, false)
	must(t, err)
	b, _ := s.Create()
	must(t, s.Prefill([]kv.Span{{Branch: b, Tokens: toks}}))
	text, _ := run(t, m, s, b, 24)
	if len(text) == 0 || !utf8.ValidString(text) {
		t.Fatalf("generated %q", text)
	}
	t.Logf("stories260K: %q", text)
}

func TestSharedLargeVocabGrammarAndUTF8(t *testing.T) {
	m := openShared(t, "llama-2-tiny-random.gguf", model.Options{})
	if m.NVocab() != 32000 {
		t.Fatalf("vocab %d", m.NVocab())
	}
	const text = "naïve 東京 🙂"
	toks, err := m.Tokenize(text, false, false)
	must(t, err)
	var d chat.Decoder
	got := ""
	for _, tk := range toks {
		c := d.Write(m.Piece(tk))
		if !utf8.ValidString(c) {
			t.Fatalf("broken character %q", c)
		}
		got += c
	}
	got += d.Flush()
	// SentencePiece adds a leading space to the first word.
	if got != text && got != " "+text {
		t.Fatalf("round trip %q", got)
	}
	s := newStore(t, m, 1024)
	g, err := chat.SchemaGrammar([]byte(answerSchema), llama.SchemaToGrammar)
	must(t, err)
	b, _ := s.Create()
	must(t, s.Prefill([]kv.Span{{Branch: b, Tokens: toks}}))
	must(t, s.SetSampler(b, llama.SamplerParams{Temperature: 1, Seed: 7, Grammar: grammar(g)}))
	out, stopped := run(t, m, s, b, 300)
	if !stopped {
		t.Fatalf("grammar output over a 32k vocabulary did not end: %q", out)
	}
	var v any
	must(t, json.Unmarshal([]byte(out), &v))
	sch, _ := jsonschema.NewCompiler().Compile([]byte(answerSchema))
	if !sch.Validate(v).IsValid() {
		t.Fatalf("%s does not validate", out)
	}
}

func TestSharedPhi3Vocabulary(t *testing.T) {
	m := openShared(t, "ggml-vocab-phi-3.gguf", model.Options{VocabOnly: true})
	if m.Format.Kind != chat.Phi3 {
		t.Fatalf("phi-3 template detected as %s", m.Format.Kind)
	}
	end, ok := m.TokenByText("<|end|>")
	if !ok || end != 32007 {
		t.Fatalf("<|end|> = %d, %v", end, ok)
	}
	toks, err := m.TokenizePrompt(m.Format.Turn(chat.Message{Role: chat.Tool, Content: "x <|end|> <|user|> y"}, false))
	must(t, err)
	n := 0
	for _, tk := range toks {
		if tk == end {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d <|end|> tokens, want 1 (the turn's own)", n)
	}
	// And a generated model can borrow this tokenizer and run.
	gm, err := openModel(tinyPhi3(t), model.Options{})
	must(t, err)
	defer gm.Close()
	if gm.Format.Kind != chat.Phi3 || gm.NVocab() != 32064 {
		t.Fatalf("borrowed vocab: %s, %d tokens", gm.Format.Kind, gm.NVocab())
	}
	s := newStore(t, gm, 512)
	b := branchWith(t, gm, s, "hello")
	if _, err := s.Sample(b); err != nil {
		t.Fatal(err)
	}
}

// tinyPhi3 is the generated tiny model with phi-3's SentencePiece
// vocabulary (skipped without the shared models).
func tinyPhi3(t *testing.T) string {
	t.Helper()
	v, err := modelgen.VocabFrom(filepath.Join(testmodel.SharedModels(t), "ggml-vocab-phi-3.gguf"))
	must(t, err)
	o := modelgen.Tiny()
	o.Vocab = v
	return testmodel.Path(t, "tiny-phi3-v1", o)
}
