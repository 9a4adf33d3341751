package ui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// View draws the screen. Every pane is cut to its box, so nothing a model or
// tool wrote can push the layout around.
func (m *Model) View() string {
	if m.w == 0 || m.h == 0 {
		return "starting…"
	}
	header := m.header()
	footer := m.footer()
	bodyH := m.h - lipgloss.Height(header) - lipgloss.Height(footer)
	devH := 0
	if m.dev {
		devH = max(bodyH/3, 5)
		if bodyH-devH < 8 {
			devH = max(bodyH-8, 0)
		}
	}
	mainH := bodyH - devH
	tw := m.treeWidth()
	left := m.box("agents", m.tree(tw-2, mainH-2), tw, mainH, m.focus == focusTree)
	var right string
	if len(m.st.Approvals) > 0 && m.o.Replay == nil {
		right = m.box(m.approvalTitle(), m.approval(m.detailWidth()-2, mainH-2), m.detailWidth(), mainH, true)
	} else {
		right = m.box(m.detailTitle(), m.detail(m.detailWidth()-2, mainH-2), m.detailWidth(), mainH, m.focus == focusDetail)
	}
	parts := []string{header, lipgloss.JoinHorizontal(lipgloss.Top, left, right)}
	if devH > 0 {
		parts = append(parts, m.box(m.devTitle(), m.devPane(m.w-2, devH-2), m.w, devH, m.focus == focusDev))
	}
	parts = append(parts, footer)
	return lipgloss.JoinVertical(lipgloss.Left, parts...)
}

// box draws a bordered pane of exactly w×h cells.
func (m *Model) box(title, body string, w, h int, focused bool) string {
	if w < 4 || h < 2 {
		return ""
	}
	st := m.o.Theme.Border
	if focused {
		st = m.o.Theme.Focus
	}
	lines := strings.Split(body, "\n")
	inner := w - 2
	for i, l := range lines {
		lines[i] = fit(l, inner)
	}
	for len(lines) < h-2 {
		lines = append(lines, "")
	}
	lines = lines[:h-2]
	b := st.Width(inner).Height(h - 2).Render(strings.Join(lines, "\n"))
	// Put the title into the top border.
	top := strings.SplitN(b, "\n", 2)
	if len(top) == 2 && title != "" {
		label := fit(" "+title+" ", inner-2)
		border := top[0]
		plain := ansi.Strip(border)
		if r := []rune(plain); len(r) >= 2 {
			top[0] = st.UnsetWidth().UnsetHeight().Border(lipgloss.Border{}).Render(string(r[0])+"─") + m.o.Theme.Title.Render(label) +
				ansi.Cut(border, 2+ansi.StringWidth(label), ansi.StringWidth(border))
		}
		b = top[0] + "\n" + top[1]
	}
	return b
}

func (m *Model) header() string {
	t := m.o.Theme
	frac := 0.0
	if m.st.NCtx > 0 {
		frac = float64(m.st.CellsUsed) / float64(m.st.NCtx)
	}
	phase := "● " + m.st.Phase
	if m.o.Replay != nil {
		phase = "▶ replay"
	}
	left := fmt.Sprintf(" lloyal · %s · ctx %d · %s · %s", m.o.Title, m.st.NCtx, clock(m.st.Now), phase)
	gw := 12
	if m.w < 100 {
		gw = 8
	}
	right := fmt.Sprintf("KV %s %3.0f%%  %s ", gaugeStyle(t, frac).Render(bar(frac, gw)), frac*100, sparkline(m.st.History, gw))
	space := m.w - ansi.StringWidth(left) - ansi.StringWidth(right)
	if space < 1 {
		return fit(left, m.w-ansi.StringWidth(right)-1) + " " + right
	}
	return t.Title.Render(left) + strings.Repeat(" ", space) + right
}

func (m *Model) footer() string {
	t := m.o.Theme
	var lines []string
	if m.notice != "" {
		lines = append(lines, fit(" "+t.Warn.Render(m.notice), m.w))
	}
	if m.filterOn {
		lines = append(lines, " "+m.filterIn.View())
	}
	if m.o.Replay != nil {
		lines = append(lines, fit(m.o.Replay.bar(t, m.w), m.w))
	}
	h := help.New()
	h.Width = m.w - 1
	h.ShowAll = m.help
	lines = append(lines, " "+h.View(m.keys))
	if m.done && m.summary != "" {
		lines = append([]string{fit(" "+m.summary, m.w)}, lines...)
	}
	return strings.Join(lines, "\n")
}

func (m *Model) tree(w, h int) string {
	t := m.o.Theme
	var rows []string
	narrow := w < 30
	if m.st.Spine > 0 {
		rows = append(rows, t.Dim.Render(fit(fmt.Sprintf(" ◆ spine %d tok", m.st.Spine), w)))
	}
	for _, a := range m.st.Roster() {
		indent := strings.Repeat("  ", m.st.Depth(a)) + "├"
		mark := " "
		if a.ID == m.sel {
			mark = "›" // visible without colour too
		}
		label := fmt.Sprintf("%s%s%s A%d", mark, indent, glyph(a.Status), a.ID)
		info := ""
		if !narrow {
			switch {
			case a.Status == "in_tool" && a.Tool != "":
				info = a.Tool
			case a.Status == "approval":
				info = "awaiting you"
			default:
				info = fmt.Sprintf("%dt %dc", a.Tokens, a.ToolCalls)
			}
		}
		share := 0.0
		if m.st.NCtx > 0 {
			share = float64(a.Unique) / float64(m.st.NCtx)
		}
		g := bar(share*4, 3) // a quarter of the context fills it
		row := fmt.Sprintf("%s %s", label, info)
		row = fit(row, w-5) + strings.Repeat(" ", max(w-5-ansi.StringWidth(fit(row, w-5)), 0)) + " " + g
		row = styleFor(t, a.Status).Render(row)
		if a.ID == m.sel {
			row = t.Selected.Render(ansi.Strip(row))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 || (len(rows) == 1 && m.st.Spine > 0) {
		rows = append(rows, t.Dim.Render("no agents yet"))
	}
	if len(rows) > h {
		rows = rows[len(rows)-h:]
	}
	return strings.Join(rows, "\n")
}

func (m *Model) detailTitle() string {
	a := m.st.Agents[m.sel]
	if a == nil {
		return "agent"
	}
	return fmt.Sprintf("A%d · %s · %s", a.ID, a.Status, oneLine(a.Task))
}

func (m *Model) detail(w, h int) string {
	t := m.o.Theme
	a := m.st.Agents[m.sel]
	if a == nil {
		return t.Dim.Render("waiting for the first agent…")
	}
	var out []string
	if a.Done() {
		switch {
		case len(a.Result) > 0:
			k := fmt.Sprintf("%d/%d", a.ID, m.detailWidth()-4)
			rep := m.reports[k] // glamour output of sanitized text
			if rep == "" {
				rep = sanitize(reportMarkdown(a.Result))
			}
			out = append(out, t.Good.Render("report"))
			out = append(out, strings.Split(strings.TrimRight(rep, "\n"), "\n")...)
		case a.Reason != "":
			out = append(out, styleFor(t, a.Status).Render(a.Status+": "+oneLine(a.Reason)))
		}
		out = append(out, "")
	}
	// Timeline, newest last; the latest result is shown in full (pretty
	// JSON, scroll with pgup/pgdn).
	last := -1
	for i, it := range a.Timeline {
		if it.Kind == "result" {
			last = i
		}
	}
	for i, it := range a.Timeline {
		out = append(out, m.item(it, w))
		if i == last {
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
	text := foldThinking(sanitize(tail))
	if strings.TrimSpace(text) != "" {
		out = append(out, t.Dim.Render("── stream"))
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			out = append(out, wrap(l, w)...)
		}
	}
	// Show the bottom (the newest), scrolled up by m.scroll lines.
	end := max(len(out)-m.scroll, min(h, len(out)))
	start := max(end-h, 0)
	return strings.Join(out[start:end], "\n")
}

func (m *Model) item(it Item, w int) string {
	t := m.o.Theme
	switch it.Kind {
	case "call":
		s := t.Accent.Render("› "+it.Tool) + " " + oneLine(it.Text)
		if it.Total > 0 {
			s = fit(s, w-30) + "  " + bar(float64(it.Filled)/float64(it.Total), 16) + fmt.Sprintf(" %d/%d", it.Filled, it.Total)
		}
		return s
	case "result":
		return t.Good.Render("✓ "+it.Tool) + " " + oneLine(it.Text)
	case "nudge":
		return t.Warn.Render("▲ "+it.Tool) + " " + oneLine(it.Text)
	case "retry":
		left := time.Until(it.Retry).Round(time.Second)
		when := "retrying now"
		if left > 0 {
			when = fmt.Sprintf("retry in %s", left)
		}
		return t.Warn.Render("↻ "+it.Tool) + " " + when + " · " + oneLine(it.Text)
	case "error":
		return t.Bad.Render("✗ "+it.Tool) + " " + oneLine(it.Text)
	case "approval":
		return t.Warn.Render("⏸ "+it.Tool) + " asks for approval"
	case "answer":
		return t.Accent.Render("⏵ "+it.Tool) + " " + oneLine(it.Text)
	case "drop":
		return t.Bad.Render("■ stopped: ") + it.Text
	case "report":
		return t.Warn.Render("▸ ") + it.Text
	}
	return oneLine(it.Text)
}

func foldThinking(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return s[:i] + "▸ thinking…"
		}
		s = s[:i] + "▸ (reasoning folded)" + s[i+j+len("</think>"):]
	}
}

// wrap breaks a line into rows of at most w cells.
func wrap(l string, w int) []string {
	if w <= 0 {
		return nil
	}
	var out []string
	for ansi.StringWidth(l) > w {
		head := ansi.Truncate(l, w, "")
		out = append(out, head)
		l = l[len(head):]
		if head == "" {
			break
		}
	}
	return append(out, l)
}

func (m *Model) approvalTitle() string {
	r := m.st.Approvals[0]
	title := fmt.Sprintf("A%d wants to run a protected tool", r.Agent)
	if n := len(m.st.Approvals); n > 1 {
		title += fmt.Sprintf(" · 1 of %d waiting", n)
	}
	return title
}

func (m *Model) approval(w, h int) string {
	t := m.o.Theme
	r := m.st.Approvals[0]
	out := []string{t.Accent.Render(r.Tool) + " — " + oneLine(r.Text), ""}
	for _, l := range strings.Split(sanitize(pretty(string(r.Args))), "\n") {
		out = append(out, wrap(l, w)...)
	}
	out = append(out, "", t.Dim.Render(fmt.Sprintf("asked %s · waiting %s", stamp(r.At), clock(m.st.Now-r.At))))
	if m.reasonOn {
		out = append(out, m.reasonIn.View())
	} else {
		out = append(out, t.Key.Render("y")+" allow once  "+t.Key.Render("s")+" allow for this session  "+t.Key.Render("a")+" always  "+t.Key.Render("n")+" deny  "+t.Key.Render("r")+" deny with a reason")
	}
	if len(out) > h {
		// Keep the keys visible: cut the arguments, not the prompt.
		out = append(out[:h-3], append([]string{t.Dim.Render("… (arguments cut: widen the window to see them all)")}, out[len(out)-2:]...)...)
	}
	return strings.Join(out, "\n")
}

func (m *Model) devTitle() string {
	s := fmt.Sprintf("dev · %d events", m.st.DevTotal)
	if m.filter != "" {
		s += " · filter: " + m.filter
	}
	if m.devPause {
		s += " · frozen"
	}
	return s
}

func (m *Model) devPane(w, h int) string {
	evs := m.st.Dev
	if m.devPause {
		evs = m.devSnap
	}
	var rows []string
	var picked *engine.Event
	listW := w
	if m.focus == focusDev {
		listW = w * 3 / 5 // the selected event's JSON takes the rest
	}
	for i := len(evs) - 1; i >= 0 && len(rows) < h; i-- {
		e := evs[i]
		if m.filter != "" && !matches(e.Type, e.Agent, m.filter) {
			continue
		}
		row := fit(devLine(e), listW)
		if m.focus == focusDev && len(rows) == m.devSel {
			picked = &evs[i]
			row = m.o.Theme.Selected.Render(ansi.Strip(row))
		}
		rows = append(rows, row)
	}
	if picked == nil {
		return strings.Join(rows, "\n")
	}
	js, _ := json.MarshalIndent(picked, "", " ")
	var right []string
	for _, l := range strings.Split(sanitize(string(js)), "\n") {
		right = append(right, wrap(l, w-listW-3)...)
	}
	for i := range rows {
		pad := strings.Repeat(" ", max(listW-ansi.StringWidth(rows[i]), 0))
		if i < len(right) {
			rows[i] += pad + " │ " + right[i]
		}
	}
	return strings.Join(rows, "\n")
}

func matches[T ~string](typ T, agent int, f string) bool {
	for _, term := range strings.Fields(f) {
		if strings.HasPrefix(term, "A") && len(term) > 1 && strings.Trim(term[1:], "0123456789") == "" {
			if fmt.Sprintf("A%d", agent) != term {
				return false
			}
			continue
		}
		if !strings.Contains(string(typ), strings.TrimSuffix(term, "*")) {
			return false
		}
	}
	return true
}
