package ui

import (
	"fmt"
	"math"
	"strings"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/themes"
)

// The surprisal strip: under an agent's stream, one cell per sampled token
// (newest right), as tall as the token was surprising (−log p, in nats;
// a full block is 7 or more). A run traces it with --trace-logprobs; ←
// picks a token, ? shows the alternatives the model weighed there.

var levels = []rune("▁▂▃▄▅▆▇█")

// surprisal is how surprising a token was, in nats.
func surprisal(s fold.Sampled) float64 { return -float64(s.Logprob) }

// strip draws probs' last w tokens; pick ≥ 0 marks the token pick places
// from the newest (and says what it was, with its alternatives when alts).
func strip(t themes.Theme, probs []fold.Sampled, w, pick int, alts bool) []string {
	if len(probs) == 0 || w < 8 {
		return nil
	}
	shown := probs[max(len(probs)-w, 0):]
	var b strings.Builder
	at := len(shown) - 1 - pick
	for i, s := range shown {
		// Clamped as a float: a trace's log-probability of 2 or -1e19
		// would index out of the levels (int(1e19) is negative).
		c := string(levels[int(min(max(surprisal(s), 0), float64(len(levels)-1)))])
		if i == at {
			c = t.Accent.Render(c)
		}
		b.WriteString(c)
	}
	head := "── surprisal · nats per token, newest right · ← picks a token"
	if pick >= 0 {
		head = "── surprisal · ←/→ token · ? alternatives · esc done"
	}
	out := []string{t.Dim.Render(fit(head, w)), b.String()}
	if pick < 0 || at < 0 {
		return out
	}
	s := shown[at]
	out = append(out, strings.Repeat(" ", at)+t.Accent.Render("▲"))
	out = append(out, fit(fmt.Sprintf("%s p=%.3f (%.2f nats) · entropy %.2f nats", quoteToken(s.Text), math.Exp(float64(s.Logprob)), surprisal(s), s.Entropy), w))
	if !alts {
		return out
	}
	if len(s.Top) == 0 {
		return append(out, t.Dim.Render(fit("  no alternatives recorded: run with --trace-logprobs=5", w)))
	}
	for _, a := range s.Top {
		mark := "  "
		if a.ID == s.ID {
			mark = "› "
		}
		out = append(out, fit(fmt.Sprintf("%s%.3f  %s", mark, math.Exp(float64(a.Logprob)), quoteToken(a.Text)), w))
	}
	return out
}

// quoteToken shows a token's text with its spaces and line breaks visible.
func quoteToken(s string) string {
	if s == "" {
		return "(no text)"
	}
	return fmt.Sprintf("%q", sanitize(s))
}
