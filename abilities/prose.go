package abilities

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// roleMarker matches what a chat template or a model may read as a change
// of speaker rather than as words: special tokens (<|im_start|>,
// <|system|>, <|eot_id|>, DeepSeek's <｜User｜>), Llama 2's [INST] and
// <<SYS>>, Gemma's <start_of_turn>, sentence tokens (<s>, </s>), the tags
// of reasoning and tool calls (<think>, <tool_call>), and a role named at
// the start of a line ("system:", "### Assistant:"). An ability's prose is
// written into every agent's system prompt: none of it may speak as
// another party.
var roleMarker = regexp.MustCompile(`(?im)` +
	`<\|[^|\n]{0,64}\|>` +
	`|<｜[^｜\n]{0,64}｜>` +
	`|\[/?INST\]` +
	`|<</?SYS>>` +
	`|</?(?:s|start_of_turn|end_of_turn|im_start|im_end|system|user|assistant|developer|think|thinking|tool_call|tool_response|tool_result|function_call|function_results)>` +
	`|^[ \t#>*_-]*(?:system|assistant|user|developer|human|tool)[ \t]*:`)

// codeFence opens or closes a Markdown code block.
var codeFence = regexp.MustCompile("```|~~~")

// checkUseWhen refuses a useWhen that is not one plain line: it is written
// into every agent's system prompt (the catalogue of abilities), so it may
// hold no line break, code fence or role marker. Install and load both
// check it (ParseManifest): a manifest edited after install is refused too.
func checkUseWhen(s string) error {
	fix := "give one plain line of at most 200 characters saying when to use the ability"
	switch {
	case strings.TrimSpace(s) == "" || len(s) > 200:
		return fmt.Errorf("useWhen %q: %s", s, fix)
	case strings.ContainsFunc(s, breaksLine):
		return fmt.Errorf("useWhen %q holds a line break or control character: %s", s, fix)
	case codeFence.MatchString(s):
		return fmt.Errorf("useWhen %q holds a code fence (%s): %s", s, codeFence.FindString(s), fix)
	case roleMarker.MatchString(s):
		return fmt.Errorf("useWhen %q holds %q, which a model may read as another speaker: %s", s, roleMarker.FindString(s), fix)
	}
	return nil
}

// breaksLine: a control character (a line feed, a carriage return, a tab,
// an escape) or a Unicode line or paragraph separator.
func breaksLine(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// Neutralise makes an ability's instructions unable to speak as another
// party: each role marker in them (see roleMarker) is rewritten so that no
// chat template or tokenizer reads it as one — angle brackets become ‹ ›,
// square ones ( ), a full-width bar a plain one, and a role named at a
// line's start loses its colon ("system -") — while a reader still sees
// what was written.
func Neutralise(text string) string {
	return roleMarker.ReplaceAllStringFunc(text, neutral.Replace)
}

// neutral rewrites one role marker (Neutralise).
var neutral = strings.NewReplacer("<", "‹", ">", "›", "[", "(", "]", ")", "｜", "|", ":", " -")
