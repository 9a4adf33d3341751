package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/termtext"
	"github.com/lloyal-ai/lloyal/themes"
)

// sanitize makes model and tool text safe to draw (termtext.Escape: a
// hostile result can neither repaint nor retitle the terminal); tabs become
// spaces.
func sanitize(s string) string {
	return strings.ReplaceAll(termtext.Escape(s), "\t", "    ")
}

// escapeNames returns e with the short strings the screen prints as they
// are (type, tool, call id, role, reason) escaped by termtext.Escape's rule,
// before the fold keeps them. Text, arguments and results keep their bytes:
// they are escaped where they are laid out, which needs their newlines.
func escapeNames(e event.Event) event.Event {
	e.Type = event.Type(termtext.Escape(string(e.Type)))
	e.Tool, e.CallID, e.Role, e.Reason = termtext.Escape(e.Tool), termtext.Escape(e.CallID), termtext.Escape(e.Role), termtext.Escape(e.Reason)
	return e
}

// oneLine flattens text for a single row. Only its head is read: a row
// shows a few hundred cells, and a 1 MiB result flattened whole for each
// of a timeline's rows, each frame, stalled the screen.
func oneLine(s string) string {
	if len(s) > maxOneLine {
		cut := maxOneLine
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.Join(strings.Fields(sanitize(s)), " ")
}

// maxOneLine is the most of a text oneLine reads.
const maxOneLine = 8 << 10

// fit truncates (display width) to w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// glyph is an agent's state at a glance: its outcome once it has one.
func glyph(a *fold.Agent) string {
	if a.Discarded {
		return "–" // a best-of-N candidate another was kept over
	}
	switch a.Outcome {
	case event.Returned:
		return "✓"
	case event.Recovered:
		return "↺"
	case event.Failed:
		return "✗"
	case event.Cancelled:
		return "⊘"
	}
	switch a.Status {
	case event.StatusThinking, event.StatusReporting:
		return "●"
	case event.StatusInTool, event.StatusDispatch, event.StatusSettling:
		return "◍"
	case event.StatusApproval:
		return "⏸"
	case event.StatusParked:
		return "↻"
	}
	return "○"
}

func styleFor(t themes.Theme, a *fold.Agent) lipgloss.Style {
	switch a.Outcome {
	case event.Returned:
		return t.Good
	case event.Recovered:
		return t.Warn
	case event.Failed, event.Cancelled:
		return t.Bad
	}
	switch a.Status {
	case event.StatusParked, event.StatusApproval:
		return t.Warn
	}
	return lipgloss.NewStyle()
}

func itoa(n int) string { return strconv.Itoa(n) }

// percent is a fraction as a percentage, three cells wide.
func percent(frac float64) string { return fmt.Sprintf("%3.0f%%", frac*100) }

// bar draws a fraction as a fixed-width bar.
func bar(frac float64, w int) string {
	if w <= 0 {
		return ""
	}
	frac = min(max(frac, 0), 1)
	n := int(frac*float64(w) + 0.5)
	return strings.Repeat("█", n) + strings.Repeat("░", w-n)
}

// sweep is a bar w cells wide for progress without a total: a block that
// moves one cell with each of n reports, back and forth.
func sweep(n, w int) string {
	const block = 4
	if w <= block {
		return strings.Repeat("█", max(w, 0))
	}
	span := w - block
	k := n % (2 * span)
	if k > span {
		k = 2*span - k
	}
	return strings.Repeat("░", k) + strings.Repeat("█", block) + strings.Repeat("░", span-k)
}

// amount is how far a tool without a total says it is: a whole number as
// one, a fraction to two places.
func amount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e12 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// gaugeStyle colours the context gauge: green < 70 %, yellow ≥ 70 %, red ≥ 90 %.
func gaugeStyle(t themes.Theme, frac float64) lipgloss.Style {
	switch {
	case frac >= 0.9:
		return t.Bad
	case frac >= 0.7:
		return t.Warn
	}
	return t.Good
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the last w samples.
func sparkline(h []float64, w int) string {
	if len(h) > w {
		h = h[len(h)-w:]
	}
	var b strings.Builder
	for _, v := range h {
		i := int(min(max(v, 0), 1) * float64(len(sparks)-1))
		b.WriteRune(sparks[i])
	}
	return b.String()
}

func clock(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}

func stamp(d time.Duration) string {
	return fmt.Sprintf("%02d:%06.3f", int(d/time.Minute), float64(d%time.Minute)/float64(time.Second))
}

// pretty indents JSON (falls back to the raw text).
func pretty(raw string) string {
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(raw), "", "  ") == nil {
		return buf.String()
	}
	return raw
}

// wrap breaks a line into rows of at most w cells.
func wrap(l string, w int) []string {
	if w <= 0 {
		return nil
	}
	// One pass (cutting with Truncate rescanned the rest for each row, and
	// its head carried the escapes after the cut, so the slice after it
	// skipped as many bytes of text: an approval could hide arguments).
	return strings.Split(ansi.Hardwrap(l, w, true), "\n")
}
