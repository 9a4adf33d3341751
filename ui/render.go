package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/themes"
	"github.com/lloyal-ai/lloyal/trace"
)

// sanitize makes model and tool text safe to draw (trace.Escape: a hostile
// result can neither repaint nor retitle the terminal); tabs become spaces.
func sanitize(s string) string {
	return strings.ReplaceAll(trace.Escape(s), "\t", "    ")
}

// oneLine flattens text for a single row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(sanitize(s)), " ")
}

// fit truncates (display width) to w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// glyph is an agent status at a glance.
func glyph(status string) string {
	switch status {
	case "thinking":
		return "●"
	case "in_tool":
		return "◍"
	case "approval":
		return "⏸"
	case "parked":
		return "↻"
	case "returned":
		return "✓"
	case "recovered":
		return "↺"
	case "failed":
		return "✗"
	case "cancelled":
		return "⊘"
	}
	return "○"
}

func styleFor(t themes.Theme, status string) lipgloss.Style {
	switch status {
	case "returned":
		return t.Good
	case "recovered", "parked", "approval":
		return t.Warn
	case "failed", "cancelled":
		return t.Bad
	}
	return lipgloss.NewStyle()
}

// bar draws a fraction as a fixed-width bar.
func bar(frac float64, w int) string {
	if w <= 0 {
		return ""
	}
	frac = min(max(frac, 0), 1)
	n := int(frac*float64(w) + 0.5)
	return strings.Repeat("█", n) + strings.Repeat("░", w-n)
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

// devLine renders one event for the dev pane.
func devLine(e engine.Event) string {
	who := "  "
	if e.Agent != 0 {
		who = fmt.Sprintf("A%d", e.Agent)
	}
	detail := ""
	switch {
	case e.Type == engine.PoolTick:
		detail = fmt.Sprintf("%d tokens · %d cells", e.Tokens, e.CellsUsed)
	case e.Tool != "" && len(e.Args) > 0:
		detail = e.Tool + " " + string(e.Args)
	case e.Type == engine.ToolProgress:
		detail = fmt.Sprintf("%s %d/%d", e.Tool, e.Filled, e.Total)
	case e.Tool != "" && len(e.Result) > 0:
		detail = e.Tool + " " + string(e.Result)
	case e.Reason != "":
		detail = e.Reason
	case e.Text != "":
		detail = e.Text
	}
	return fmt.Sprintf("%s  %-3s %-18s %s", stamp(e.At), who, e.Type, oneLine(detail))
}
