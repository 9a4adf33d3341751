package modelgen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/gguf"
)

// Vocab is a tokenizer to embed in a generated model: the tokenizer.* keys of
// a GGUF file (tokens, scores, types, special ids, chat template, …).
type Vocab struct {
	KV     []gguf.KV
	Tokens []string
}

// chatMLTemplate is a Qwen 2.5–style ChatML template with Hermes tool calls.
// lloyal does not run Jinja; the template is there so the model identifies
// itself as ChatML with <tool_call> support, as real instruct models do.
const chatMLTemplate = `{%- if tools %}{{- '<|im_start|>system\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- endif %}` +
	`{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}` +
	`{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}` +
	`{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}` +
	`{%- else %}{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- endif %}{%- endif %}` +
	`{%- for message in messages %}{%- if message.role != 'system' %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endif %}{%- endfor %}` +
	`{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// words seeds the built-in vocabulary with whole-word pieces so common English
// tokenizes into a few tokens instead of one per letter.
var words = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there had one all can would their we him been has when who will more no if out so said what up its about into than them only could new some these other time may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three
	agent agents tool tools report search read file note task result context branch spine model token tokens call json name arguments error answer source sources glossary term corpus write
	system user assistant function functions query true false null`)

// BuiltinVocab is a small SentencePiece-style vocabulary with byte fallback
// and ChatML's special tokens: enough for llama.cpp to tokenize any UTF-8
// text and for lloyal to drive chat turns and grammar-forced tool calls.
func BuiltinVocab() Vocab {
	v := newVocabBuilder()
	// Pieces: every printable ASCII character, then every prefix of every
	// seed word (SentencePiece merges need each intermediate piece), scored so
	// longer pieces win.
	pieces := basePieces()
	for _, w := range words {
		for _, form := range []string{"▁" + w, w} {
			r := []rune(form)
			for i := 2; i <= len(r); i++ {
				pieces = append(pieces, string(r[:i]))
			}
		}
	}
	pieces = append(pieces, `▁{"`, `":`, `▁"`, `",`, `"}`, `{"`, `"`, `}`, `{`, `▁[`, `]`, `▁:`)
	sort.SliceStable(pieces, func(i, j int) bool { return len([]rune(pieces[i])) < len([]rune(pieces[j])) })
	for _, p := range pieces {
		v.add(p, float32(len([]rune(p)))-float32(len(v.tokens))*1e-4, gguf.TokenNormal)
	}
	return v.vocab()
}

// vocabBuilder collects a SentencePiece vocabulary: byte fallback and the
// chat special tokens first, at fixed ids as in real vocabularies, then
// pieces.
type vocabBuilder struct {
	tokens []string
	scores []float32
	types  []int32
	seen   map[string]bool
	imEnd  int32
}

func newVocabBuilder() *vocabBuilder {
	v := &vocabBuilder{seen: map[string]bool{}}
	v.add("<unk>", 0, gguf.TokenUnknown)
	v.add("<s>", 0, gguf.TokenControl)
	v.add("</s>", 0, gguf.TokenControl)
	for b := 0; b < 256; b++ {
		v.add(fmt.Sprintf("<0x%02X>", b), 0, gguf.TokenByte)
	}
	v.add("<|im_start|>", 0, gguf.TokenControl)
	v.imEnd = int32(len(v.tokens))
	v.add("<|im_end|>", 0, gguf.TokenControl)
	// Tool-call and reasoning markers are user-defined (rendered as text), as in
	// Qwen: the grammar engine matches them as text.
	for _, t := range []string{"<tool_call>", "</tool_call>", "<think>", "</think>"} {
		v.add(t, 0, gguf.TokenUserDefined)
	}
	return v
}

// add appends a token unless the vocabulary has it already.
func (v *vocabBuilder) add(t string, score float32, ty int32) {
	if v.seen[t] {
		return
	}
	v.seen[t] = true
	v.tokens = append(v.tokens, t)
	v.scores = append(v.scores, score)
	v.types = append(v.types, ty)
}

// basePieces are the single-character pieces every text starts from:
// printable ASCII, the SentencePiece space and the newline.
func basePieces() []string {
	var pieces []string
	for c := 0x21; c < 0x7f; c++ {
		pieces = append(pieces, string(rune(c)))
	}
	return append(pieces, "▁", "\n")
}

func (v *vocabBuilder) vocab() Vocab {
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: v.tokens},
		{Key: "tokenizer.ggml.scores", Value: v.scores},
		{Key: "tokenizer.ggml.token_type", Value: v.types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(v.imEnd)},
		{Key: "tokenizer.ggml.eot_token_id", Value: uint32(v.imEnd)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(0)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(2)},
		{Key: "tokenizer.ggml.add_bos_token", Value: false},
		{Key: "tokenizer.ggml.add_eos_token", Value: false},
		{Key: "tokenizer.ggml.add_space_prefix", Value: false},
		{Key: "tokenizer.chat_template", Value: chatMLTemplate},
	}
	return Vocab{KV: kv, Tokens: v.tokens}
}

// VocabFrom borrows the tokenizer of another GGUF file (every tokenizer.* key),
// e.g. a vocab-only file from llama.cpp's test models.
func VocabFrom(path string) (Vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Vocab{}, err
	}
	var v Vocab
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			v.KV = append(v.KV, kv)
		}
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) == 0 {
		return Vocab{}, fmt.Errorf("borrow vocabulary from %s: it has no tokenizer.ggml.tokens", path)
	}
	v.Tokens = toks
	return v, nil
}
