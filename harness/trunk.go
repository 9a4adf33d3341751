package harness

// The follow-ups' trunk: the previous turn joins it as one exchange, fit to
// the room the context has.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/report"
)

// turn is a previous turn as the trunk takes it: the user's side, and the
// answer's parts in order, the newest (the final report) last, each also
// cut to its claims (claims[i] is parts[i]'s).
type turn struct {
	user          string
	parts, claims []string
}

// runTurn is the whole run as the trunk's first exchange: the input as
// the user's side, and as the answer each step's results in order (each
// agent's task and result), the last step's — the final report — last.
func (p *Program) runTurn(steps []Step, results map[string][]engine.AgentResult) turn {
	var t turn
	for i, s := range steps {
		rs := results[s.ID]
		if i == len(steps)-1 {
			rs = results[lastTurn]
		}
		if len(rs) == 0 {
			continue
		}
		name := cmp.Or(s.ID, fmt.Sprintf("step %d", i+1))
		t.parts = append(t.parts, fmt.Sprintf("%s (%s):\n%s", name, s.Role, joined(rs)))
		t.claims = append(t.claims, fmt.Sprintf("%s (%s), cut to its claims:\n%s", name, s.Role, claimsOf(rs)))
	}
	t.user = cmp.Or(p.o.Input, tasksOf(results[lastTurn]))
	return t
}

// followUpTurn is a follow-up's question and answer as the trunk's next
// exchange: one part.
func followUpTurn(rs []engine.AgentResult) turn {
	return turn{user: tasksOf(rs), parts: []string{joined(rs)}, claims: []string{claimsOf(rs)}}
}

// extendTrunk appends the previous turn to the trunk, leaving room for
// the question. When the context has no room for all of it above the soft
// limit, its older parts (all but the newest; a lone part itself) are
// replaced first: on lloyal's demo model, or when the follow-up role's
// reports may only quote, by their claims (cutClaims), otherwise by a
// summary the model writes (summarise) — the newest part, the final
// report, is kept whole. If that still does not fit, the oldest parts
// are cut (each to half, then out), then the newest, until it fits. A
// trunk_summarised or trunk_cut note says what was done; with no room
// even for the turn's start, the follow-up starts without it
// (trunk_full).
//
// sum is the summariser's spec (its role and plan, not its task). It
// returns the summariser's agent id (0: none ran), whose result is not
// part of the follow-up's answer.
func (p *Program) extendTrunk(ctx context.Context, pc *engine.PoolContext, prev turn, question string, sum engine.AgentSpec) (summaryAgent int, err error) {
	// The question's own room: its task with the chat markup around it,
	// counted generously (a token is rarely shorter than two bytes).
	leave := len(question)/2 + 64
	extend := func(parts []string) error {
		return pc.ExtendSpineLeaving(ctx, prev.user, strings.Join(parts, "\n\n"), leave)
	}
	if err := extend(prev.parts); !errors.Is(err, engine.ErrNoRoom) {
		return 0, err
	}
	older := max(len(prev.parts)-1, 1)
	parts, note, done := prev.parts, "trunk_cut", "it has no part to shorten"
	switch {
	case len(prev.parts) == 0: // a run that left no result: only the input
	case p.cutClaims(sum.Role):
		parts = append(slices.Clone(prev.claims[:older]), prev.parts[older:]...)
		done = olderParts(older, len(prev.parts)) + " cut to their claims (the model writes no summary)"
	default:
		text, id, why, err := p.summarise(ctx, pc, sum, prev.parts[:older])
		if err != nil {
			return id, err
		}
		summaryAgent = id
		if text != "" {
			parts = append([]string{text}, prev.parts[older:]...)
			note, done = "trunk_summarised", fmt.Sprintf("%s replaced by agent %d's summary", olderParts(older, len(prev.parts)), id)
		} else {
			done = "no summary: " + why
		}
	}
	for cut := 0; ; cut++ {
		err := extend(parts)
		if !errors.Is(err, engine.ErrNoRoom) {
			if err == nil {
				reason := "the previous turn did not fit the trunk: " + done
				if cut > 0 {
					reason += fmt.Sprintf("; then cut %d times, its oldest parts first, the newest kept longest", cut)
				}
				pc.Note(note, reason)
			}
			return summaryAgent, err
		}
		if parts = cutOldest(parts); parts == nil {
			pc.Note("trunk_full", "no room for the previous turn on the trunk: the follow-up starts without it")
			return summaryAgent, nil
		}
	}
}

// olderParts names the older parts of a turn of n parts in a note.
func olderParts(older, n int) string {
	switch {
	case n == 1:
		return "its only part"
	case older == 1:
		return "its part before the newest"
	}
	return fmt.Sprintf("its %d parts before the newest", older)
}

// cutClaims reports whether a turn too long for the trunk is cut to its
// claims rather than summarised by the model: on lloyal's demo model
// (it copies well and writes badly), or when role's reports may only
// quote (a summary could not be written through its terminal, and its
// claims are what its reports hold anyway).
func (p *Program) cutClaims(role string) bool {
	t := p.f.Roles[role].Terminal
	return p.o.Demo || t.QuoteOnly && p.grounded(t)
}

// Bounds on a summary of a turn too long for the trunk.
const (
	// minSummarised is the least text worth an agent to summarise: less
	// is only halved.
	minSummarised = 400
	// summaryWords bounds a summary's words; a summary asks for a word
	// for every 12 bytes of its text (about half its words), at least 30.
	summaryWords = 150
)

// summarise has the model sum up old, the older parts of a turn too long
// for the trunk: an agent of the follow-up role (sum), forked from the
// trunk, whose plan is its terminal, so it reports at once in one turn of
// the role's turn_tokens. Its task holds as much of old as fits the room
// above the soft limit (halved until it does); what it generates lives in
// the room between the soft and hard limits, and its cells go back when it
// ends. It returns the summary headed as one, or "" and why not; err only
// when the pool or ctx ended.
func (p *Program) summarise(ctx context.Context, pc *engine.PoolContext, sum engine.AgentSpec, old []string) (text string, agent int, why string, err error) {
	material := strings.Join(old, "\n\n")
	for {
		if len(material) < minSummarised {
			return "", 0, fmt.Sprintf("too little room or text to summarise (%d bytes)", len(material)), nil
		}
		words := min(max(len(material)/12, 30), summaryWords)
		sum.Task = fmt.Sprintf("Summarise what follows in at most %d words for a reader who will ask about it: keep its names, numbers and cited sources, and report the summary at once.\n\n%s", words, material)
		fits, err := pc.CanFit(ctx, sum)
		if err != nil {
			return "", 0, "", err
		}
		if fits {
			break
		}
		material = chat.Clip(material, utf8.RuneCountInString(material)/2)
	}
	a, err := pc.Spawn(ctx, sum)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, engine.ErrPoolClosed) {
			return "", 0, "", err
		}
		return "", 0, "its agent was refused: " + err.Error(), nil
	}
	r, err := pc.Wait(ctx, a)
	if err != nil {
		return "", a.ID, "", err
	}
	summary := strings.TrimSpace(r.Text())
	switch {
	case !r.Ok():
		return "", a.ID, fmt.Sprintf("agent %d ended %s", a.ID, r.Outcome), nil
	case summary == "" || len(summary) >= len(material):
		return "", a.ID, fmt.Sprintf("agent %d's summary was no shorter than its text", a.ID), nil
	}
	return "Summarised (the whole did not fit):\n" + summary, a.ID, "", nil
}

// summariser is the spec of the agent that sums up a turn too long for the
// trunk: of the follow-up role, its first turn a call to the role's
// terminal, so it reports from what its task holds without a tool call.
func summariser(role string, terminal engine.Tool) engine.AgentSpec {
	s := engine.AgentSpec{Role: role}
	if terminal != nil {
		s.Plan = []engine.ToolChoice{engine.ToolChoice(terminal.Spec().Name)}
	}
	return s
}

// cutOldest is parts with the oldest part that still has text halved (a
// part under 200 bytes is dropped), the newest last of all; nil when
// nothing is left.
func cutOldest(parts []string) []string {
	for i, s := range parts {
		if i < len(parts)-1 || len(parts) == 1 {
			if len(s) < 200 {
				return slices.Delete(slices.Clone(parts), i, i+1)
			}
			out := slices.Clone(parts)
			out[i] = chat.Clip(s, len(s)/2)
			return out
		}
	}
	return nil
}

// claimsOf is results cut to their claims, listed as joined lists them:
// each agent's task (its first line), then the quotes its report cites
// with their sources or, for a report without claims, the sentences of
// its answer that carry a citation ([path:lines]).
func claimsOf(rs []engine.AgentResult) string {
	var b strings.Builder
	for _, r := range rs {
		task, _, _ := strings.Cut(r.Task, "\n")
		fmt.Fprintf(&b, "- %s\n", chat.Clip(task, 120))
		var cited []string
		if r.Ok() {
			rep := report.Read(r.Result)
			for _, c := range rep.Claims {
				cited = append(cited, c.Cited())
			}
			if len(cited) == 0 {
				cited = citedSentences(rep.Answer)
			}
		}
		if len(cited) == 0 {
			cited = []string{"(no cited claim)"}
		}
		for _, c := range cited {
			fmt.Fprintf(&b, "  %s\n", c)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// citation is a source cited as a claim cites it (report.Claim.Cited):
// [path:lines].
var citation = regexp.MustCompile(`\[[^\[\]\n]+:\d+(?:-\d+)?\]`)

// citedSentences are the sentences of text that carry a citation. A
// sentence ends at a line break, or at a full stop, question or
// exclamation mark followed by a space or the end, a citation right after
// it still its own ("… the ledger. [a.md:6-7]").
func citedSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		start := 0
		for i := 0; i < len(line); i++ {
			if c := line[i]; c != '.' && c != '?' && c != '!' {
				continue
			}
			end := i + 1
			if end < len(line) && line[end] != ' ' {
				continue // inside a word or a path (a.md)
			}
			rest := strings.TrimLeft(line[end:], " ")
			if loc := citation.FindStringIndex(rest); loc != nil && loc[0] == 0 {
				end = len(line) - len(rest) + loc[1]
			}
			out = append(out, line[start:end])
			start, i = end, end-1
		}
		out = append(out, line[start:])
	}
	return slices.DeleteFunc(trimAll(out), func(s string) bool { return !citation.MatchString(s) })
}

// trimAll is ss with each one's surrounding space trimmed.
func trimAll(ss []string) []string {
	for i, s := range ss {
		ss[i] = strings.TrimSpace(s)
	}
	return ss
}

// lastTurn keys the previous turn's results (the last step's, then each
// follow-up's) among a run's results.
const lastTurn = "\x00last"

// tasksOf is the first lines of results' tasks, one per line: the user's
// side of a turn appended to the trunk.
func tasksOf(rs []engine.AgentResult) string {
	var lines []string
	for _, r := range rs {
		task, _, _ := strings.Cut(r.Task, "\n")
		lines = append(lines, task)
	}
	return strings.Join(lines, "\n")
}
