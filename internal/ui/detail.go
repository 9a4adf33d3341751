package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/report"
	"github.com/lloyal-ai/lloyal/themes"
)

// detailPane shows the selected agent: its report once it has one, its tool
// timeline (the latest result in full, progress bars, retry countdowns),
// the tail of its stream and, when the run traced token probabilities, the
// surprisal strip (surprisal.go). pgup/pgdn scroll.
type detailPane struct {
	*shared
	scroll               int  // lines from the bottom
	json                 bool // the latest tool result in full (pretty JSON)
	cite                 int  // the claim whose cited lines are shown (1-based; 0: none)
	scrollUp, scrollDown key.Binding
	toggleJSON, nextCite key.Binding
	reports              map[string]string // glamour-rendered reports by agent/width
	// The token picker on the strip: picking (it then takes ←, →, ? and
	// esc before the global keys), the token picked (from the newest) and
	// whether its alternatives show.
	picking       bool
	pick          int
	alts          bool
	older, newer  key.Binding
	showAlts, end key.Binding
}

func newDetail(s *shared) *detailPane {
	return &detailPane{shared: s, reports: map[string]string{},
		scrollUp:   key.NewBinding(key.WithKeys("pgup", "K"), key.WithHelp("pgup", "scroll up")),
		scrollDown: key.NewBinding(key.WithKeys("pgdown", "J"), key.WithHelp("pgdn", "scroll down")),
		toggleJSON: key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "result JSON")),
		nextCite:   key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "cited lines")),
		older:      key.NewBinding(key.WithKeys("left"), key.WithHelp("←", "pick a token")),
		newer:      key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "newer token")),
		showAlts:   key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "alternatives")),
		end:        key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "done")),
	}
}

func (p *detailPane) Help() []key.Binding {
	if p.picking {
		return []key.Binding{p.older, p.newer, p.showAlts, p.end}
	}
	return []key.Binding{p.toggleJSON, p.nextCite, p.scrollUp, p.scrollDown, p.older}
}

// Typing: while a token is picked the picker takes its keys first.
func (p *detailPane) Typing() bool { return p.picking }

// isPicker: the picker's keys are commands, not text.
func (*detailPane) isPicker() {}

// probs are the selected agent's token probabilities.
func (p *detailPane) probs() []fold.Sampled {
	if a := p.st.Agents[p.sel]; a != nil {
		return a.Probs
	}
	return nil
}

func (p *detailPane) Update(k tea.KeyMsg) (bool, tea.Cmd) {
	if p.picking {
		switch {
		case key.Matches(k, p.older):
			p.pick = min(p.pick+1, max(len(p.probs())-1, 0))
		case key.Matches(k, p.newer):
			p.pick = max(p.pick-1, 0)
		case key.Matches(k, p.showAlts):
			p.alts = !p.alts
		case key.Matches(k, p.end):
			p.picking, p.alts = false, false
		default:
			return false, nil
		}
		return true, nil
	}
	switch {
	case key.Matches(k, p.older) && len(p.probs()) > 0:
		p.picking, p.pick = true, 0
	case key.Matches(k, p.scrollUp):
		p.scroll += 5
	case key.Matches(k, p.scrollDown):
		p.scroll = max(p.scroll-5, 0)
	case key.Matches(k, p.toggleJSON):
		p.json = !p.json
	case key.Matches(k, p.nextCite):
		// The next claim's cited lines, then none again.
		n := 0
		if a := p.st.Agents[p.sel]; a != nil {
			n = len(claimsOf(a.Result))
		}
		p.cite = (p.cite + 1) % (n + 1)
	default:
		return false, nil
	}
	return true, nil
}

func (p *detailPane) Title() string {
	a := p.st.Agents[p.sel]
	if a == nil {
		return "agent"
	}
	if a.Ppl > 0 {
		// How sure the model was of its words: a high figure beside a
		// report is a reason to check it.
		return fmt.Sprintf("A%d · %s · ppl %.2f · %s", a.ID, a.State(), a.Ppl, oneLine(a.Task))
	}
	return fmt.Sprintf("A%d · %s · %s", a.ID, a.State(), oneLine(a.Task))
}

// reportMsg is a report rendered off the UI goroutine (render).
type reportMsg struct{ key, text string }

// Receive keeps a rendered report.
func (p *detailPane) Receive(msg tea.Msg) (bool, tea.Cmd) {
	r, ok := msg.(reportMsg)
	if ok {
		p.reports[r.key] = r.text
	}
	return ok, nil
}

func reportKey(id, w int) string { return fmt.Sprintf("%d/%d", id, w) }

// render renders the selected agent's report with glamour, off the UI
// goroutine (a Cmd), once per agent and width.
func (p *detailPane) render() tea.Cmd {
	a := p.st.Agents[p.sel]
	if a == nil || len(a.Result) == 0 || p.width <= 0 {
		return nil
	}
	w := p.width - 2
	k := reportKey(a.ID, w)
	if _, ok := p.reports[k]; ok {
		return nil
	}
	p.reports[k] = "" // in flight
	md := reportMarkdown(a.Result)
	style := markdownStyle(p.theme)
	return func() tea.Msg { return reportMsg{key: k, text: renderMarkdown(md, w, style)} }
}

func reportMarkdown(raw []byte) string {
	r := report.Read(raw)
	text := r.Answer
	if len(r.Claims) > 0 {
		// Numbered, so c can step to one and show its lines.
		var b strings.Builder
		if a, ok := modelAnswer(raw); ok {
			b.WriteString(a + "\n\n")
		}
		for i, c := range r.Claims {
			fmt.Fprintf(&b, "%d. %s `[%s]`\n", i+1, c.Quote, c.Source)
		}
		text = strings.TrimRight(b.String(), "\n")
	}
	if len(r.Sources) > 0 {
		text += "\n\n**Sources:** " + strings.Join(r.Sources, ", ")
	}
	if text == string(raw) && len(raw) > 0 && raw[0] == '{' {
		return "```json\n" + pretty(string(raw)) + "\n```"
	}
	return text
}

func (p *detailPane) View(w, h int) string {
	t := p.theme
	a := p.st.Agents[p.sel]
	if a == nil {
		return t.Dim.Render("waiting for the first agent…")
	}
	var out []string
	if a.Done() {
		switch {
		case len(a.Result) > 0:
			rep := p.reports[reportKey(a.ID, p.width-2)] // glamour output of sanitized text
			if rep == "" {
				rep = sanitize(reportMarkdown(a.Result))
			}
			out = append(out, t.Good.Render("report"))
			out = append(out, strings.Split(strings.TrimRight(rep, "\n"), "\n")...)
			if claims := claimsOf(a.Result); p.cite > 0 && p.cite <= len(claims) {
				c := claims[p.cite-1]
				out = append(out, t.Accent.Render(fmt.Sprintf("── claim %d of %d: %s", p.cite, len(claims), oneLine(c.Source))))
				lines := citedLines(a.Timeline, c.Source)
				if len(lines) == 0 {
					lines = []string{"     │ " + c.Quote + " (a helper read it)"}
				}
				for _, l := range lines {
					out = append(out, wrap(sanitize(l), w)...)
				}
			}
		case a.Reason != "":
			out = append(out, styleFor(t, a).Render(string(a.Outcome)+": "+oneLine(plainReason(a.Reason))))
		}
		if isReasonCode(a.Reason) {
			out = append(out, t.Dim.Render("code: "+oneLine(a.Reason)))
		}
		out = append(out, "")
	}
	// Timeline, newest last: one line each; v shows the latest result in
	// full (pretty JSON, scroll with pgup/pgdn).
	last := -1
	for i, it := range a.Timeline {
		if it.Kind == fold.ItemResult {
			last = i
		}
	}
	for i, it := range a.Timeline {
		out = append(out, item(t, it, w, a.Done()))
		if src, ok := p.sources[it.Tool]; ok && (it.Kind == fold.ItemCall || it.Kind == fold.ItemApproval) {
			out = append(out, t.Dim.Render(fit("  ↳ from "+oneLine(src), w)))
		}
		if i == last && p.json {
			for _, l := range strings.Split(sanitize(pretty(it.Text)), "\n") {
				out = append(out, wrap("   "+l, w)...)
			}
		}
	}
	// Streamed text (reasoning folded: <think> blocks shown as one line).
	// Only the tail can be on screen: do not sanitize and wrap 16 KiB of
	// text every frame to show the last few lines of it.
	tail := a.Text
	if limit := (w + 1) * (h + 2); len(tail) > limit {
		cut := len(tail) - limit
		for cut < len(tail) && tail[cut]&0xC0 == 0x80 {
			cut++
		}
		tail = tail[cut:]
	}
	text := foldThinking(sanitize(tail), a.Done())
	if strings.TrimSpace(text) != "" {
		out = append(out, t.Dim.Render("── stream"))
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			out = append(out, wrap(l, w)...)
		}
	}
	pick := -1
	if p.picking {
		pick = p.pick
	}
	out = append(out, strip(t, a.Probs, w, pick, p.alts)...)
	// Show the bottom (the newest), scrolled up by p.scroll lines.
	end := max(len(out)-p.scroll, min(h, len(out)))
	start := max(end-h, 0)
	return strings.Join(out[start:end], "\n")
}

func item(t themes.Theme, it fold.Item, w int, done bool) string {
	switch it.Kind {
	case fold.ItemCall:
		s := t.Accent.Render("› "+it.Tool) + " " + oneLine(it.Text)
		switch {
		case it.Total > 0:
			s = fit(s, w-30) + "  " + bar(float64(it.Filled)/float64(it.Total), 16) + fmt.Sprintf(" %d/%d", it.Filled, it.Total)
		case it.Indeterminate():
			// No total to fill: a block that moves with each report,
			// and how far the tool says it is.
			s = fit(s, w-30) + "  " + sweep(it.Progressed, 16) + " " + amount(it.Value)
		}
		if it.Message != "" {
			s = fit(s+" · "+oneLine(it.Message), w)
		}
		return s
	case fold.ItemResult:
		return t.Good.Render("✓ "+it.Tool) + " " + oneLine(it.Text)
	case fold.ItemNudge:
		return t.Warn.Render("▲ "+it.Tool) + " " + oneLine(it.Text)
	case fold.ItemRetry:
		left := time.Until(it.Retry).Round(time.Second)
		when := "retrying now"
		if left > 0 {
			when = fmt.Sprintf("retry in %s", left)
		}
		return t.Warn.Render("↻ "+it.Tool) + " " + when + " · " + oneLine(it.Text)
	case fold.ItemError:
		return t.Bad.Render("✗ "+it.Tool) + " " + oneLine(it.Text)
	case fold.ItemApproval:
		return t.Warn.Render("⏸ "+it.Tool) + " asks for approval"
	case fold.ItemAnswer:
		return t.Accent.Render("⏵ "+it.Tool) + " " + oneLine(it.Text)
	case fold.ItemDrop:
		return t.Bad.Render("■ ") + oneLine(plainReason(it.Text))
	case fold.ItemReport:
		if done {
			return t.Warn.Render("▸ ") + "wrote its report (" + oneLine(plainReason(it.Text)) + ")"
		}
		return t.Warn.Render("▸ ") + "writing its report (" + oneLine(plainReason(it.Text)) + ")"
	}
	return oneLine(it.Text)
}

// foldThinking shows <think> blocks as one line each; an unclosed one is
// the agent thinking now, or (once it has ended) reasoning it never closed.
func foldThinking(s string, done bool) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			if done {
				return s[:i] + "▸ (reasoning cut off)"
			}
			return s[:i] + "▸ thinking…"
		}
		s = s[:i] + "▸ (reasoning folded)" + s[i+j+len("</think>"):]
	}
}
