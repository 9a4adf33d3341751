package repetition

import (
	"strings"
	"testing"
	"unicode/utf8"
)

const prose = `The skiff pool claims jobs from the harbor queue in the order they were
filed. Each claim carries a lease; when the lease expires before the job
finishes, the harbor hands the job to the next idle skiff. Operators can
extend a lease with the renew command, but only while it is still live.
Last quarter the harbor processed 1,840 jobs, of which 12 were re-leased
after an expiry (see INC-2026-026 for the one that was not).`

const toolCall = `<tool_call>{"name": "search", "arguments": {"query": "lease expiry"}}</tool_call>`

const table6 = `| Port | Service | Owner | Lease | Retries | Notes |
|---|---|---|---|---|---|
| 7070 | harbor | ops | 30s | 3 | default |
| 7071 | skiff | ops | 30s | 3 | canary |
| 7072 | ledger | data | 60s | 5 | - |
`

const paths = `Files read:
- engine/repetition/repetition.go
- engine/salvage.go
- engine/decode.go
- tools/research/research.go
- docs/handbook/glossary.md
`

const goCode = "func max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n\n" +
	"var zeros = [8]byte{0, 0, 0, 0, 0, 0, 0, 0}\n" +
	"// ----------------------------------------------------------------------------\n"

const citations = "Tidewater's harbor listens on port 7070 [glossary.md:20]. A skiff claims jobs [glossary.md:60]."

// separatorRow returns a Markdown table separator row of cols columns whose
// cells are cell, e.g. separatorRow(3, "---") == "|---|---|---|".
func separatorRow(cols int, cell string) string {
	return "|" + strings.Repeat(cell+"|", cols)
}

func TestTail(t *testing.T) {
	backticksPrefix := "Here is the patch:\n"
	jsonPrefix := `<tool_call>{"name": "search", "arguments": {"query": "lease`
	longPrefix := strings.Repeat(prose+"\n\n", 3) // > Window bytes
	unit64 := prose[:64]                          // no shorter period
	tests := []struct {
		name      string
		text      string
		wantOK    bool
		wantStart int // checked when wantOK
		wantUnit  int // checked when wantOK
	}{
		{"backticks", backticksPrefix + strings.Repeat("`", 60), true, len(backticksPrefix), 1},
		{"backticks only", strings.Repeat("`", 48), true, 0, 1},
		{"run", "Answer:\n" + strings.Repeat("Run. ", 12), true, len("Answer:\n"), 5},
		{"run partial last copy", "Answer:\n" + strings.Repeat("Run. ", 12) + "Ru", true, len("Answer:\n"), 5},
		// The loop starts as early as the periodicity does: the '.' and
		// ' ' of "now. " already match the unit, so the unit is ". Run".
		{"run rotated", "I will now. " + strings.Repeat("Run. ", 12), true, len("I will now"), 5},
		{"previouses", "It compares:\n" + strings.Repeat("the previouses of ", 6), true, len("It compares:\n"), 18},
		{"spaces in json", jsonPrefix + strings.Repeat(" ", 60), true, len(jsonPrefix), 1},
		{"tabs", "x:" + strings.Repeat("\t", 50), true, 2, 1},
		{"newlines", "Done." + strings.Repeat("\n", 48), true, 5, 1},
		{"loop after long prefix", longPrefix + strings.Repeat("ab", 1000), true, len(longPrefix), 2},
		{"64-byte unit", "x " + strings.Repeat(unit64, 4), true, 2, 64},
		{"sentence unit", "Plan:\n" + strings.Repeat("I will search the handbook now. ", 4), true, len("Plan:\n"), 32},
		{"rule loop", "Summary\n" + strings.Repeat("-", 300), true, len("Summary\n"), 1},
		{"table scaffolding loop", "| a |\n" + strings.Repeat("| ", 150), true, len("| a |\n"), 2},
		// "ʂ" is CA 82 and "ł" is C5 82: the byte periodicity reaches back
		// into "ʂ", and start is moved forward to the rune boundary.
		{"utf8 boundary", "xʂ" + strings.Repeat("ł", 30), true, len("xʂ"), 2},

		{"empty", "", false, 0, 0},
		{"prose", prose, false, 0, 0},
		{"prose twice", prose + "\n\n" + prose, false, 0, 0},
		{"tool call", toolCall, false, 0, 0},
		{"table 6 columns", table6, false, 0, 0},
		{"incident id", "See INC-2026-026.", false, 0, 0},
		{"paths", paths, false, 0, 0},
		{"numbers", "The harbor processed 1,840 jobs; 1,000,000,000,000 bytes.", false, 0, 0},
		{"go code", goCode, false, 0, 0},
		{"citations", citations, false, 0, 0},
		{"short repeat", "very very very very very good", false, 0, 0},
		{"47 spaces", "x" + strings.Repeat(" ", MinLoopBytes-1), false, 0, 0},
		{"3 copies of a long unit", "x " + strings.Repeat("I will search the handbook now. ", 3), false, 0, 0},
		{"80-column rule", strings.Repeat("=", 80) + "\n" + strings.Repeat("-", 80), false, 0, 0},
		{"separator 8 cols", separatorRow(8, "---"), false, 0, 0},
		{"separator 8 cols spaced", separatorRow(8, " --- "), false, 0, 0},
		{"separator 8 cols aligned", separatorRow(8, ":---:"), false, 0, 0},
		{"separator 8 cols wide", separatorRow(8, strings.Repeat("-", 30)), false, 0, 0},
		{"uniform row 8 cols", "|" + strings.Repeat(" yes |", 8), false, 0, 0},
		{"empty row 8 cols", "|" + strings.Repeat("   |", 8), false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start, unit, ok := Find(tc.text)
			if ok != tc.wantOK {
				t.Fatalf("Find ok = %v, want %v (start %d, unit %d)", ok, tc.wantOK, start, unit)
			}
			if s2, ok2 := Tail(tc.text); s2 != start || ok2 != ok {
				t.Fatalf("Tail = (%d, %v), Find = (%d, %v)", s2, ok2, start, ok)
			}
			if !ok {
				if start != len(tc.text) || unit != 0 {
					t.Fatalf("no loop: start %d unit %d, want %d 0", start, unit, len(tc.text))
				}
				// Tail runs after every token: no prefix of a negative
				// may fire either.
				for i := range len(tc.text) {
					if s, ok := Tail(tc.text[:i]); ok {
						t.Fatalf("prefix of %d bytes fires at %d: %q", i, s, tc.text[s:i])
					}
				}
				return
			}
			if start != tc.wantStart || unit != tc.wantUnit {
				t.Fatalf("start, unit = %d, %d; want %d, %d (kept %q)", start, unit,
					tc.wantStart, tc.wantUnit, tc.text[:min(len(tc.text), start+unit)])
			}
			checkLoop(t, tc.text, start, unit)
		})
	}
}

// TestTailFiresEarly feeds a loop one byte at a time, as generation does,
// and checks that Tail fires as soon as the thresholds are met and keeps
// firing with the same start.
func TestTailFiresEarly(t *testing.T) {
	prefix := "Answer:\n"
	loopUnit := "Run. "
	text := prefix + strings.Repeat(loopUnit, 40)
	first := -1
	for i := len(prefix); i <= len(text); i++ {
		start, ok := Tail(text[:i])
		if !ok {
			if first >= 0 {
				t.Fatalf("fired at %d bytes, stopped at %d", first, i)
			}
			continue
		}
		if first < 0 {
			first = i
		}
		if start != len(prefix) {
			t.Fatalf("at %d bytes start = %d, want %d", i, start, len(prefix))
		}
	}
	if want := len(prefix) + MinLoopBytes; first != want {
		t.Fatalf("first fired at %d bytes, want %d", first, want)
	}
}

func TestMostly(t *testing.T) {
	report := "## Findings\n\n" + prose + "\n\n" + citations + "\n"
	tests := []struct {
		name string
		text string
		want bool
	}{
		{"run", strings.Repeat("Run. ", 20), true},
		{"previouses", "The answer is " + strings.Repeat("the previouses of ", 10), true},
		{"sentence loop", strings.Repeat("I will search the handbook now. ", 6), true},
		{"backticks", "Report:\n" + strings.Repeat("`", 200), true},
		{"spaces after short text", "ok" + strings.Repeat(" ", 60), true},
		{"report then loop", "The harbor listens on port 7070. " + strings.Repeat("port port ", 30), true},
		{"interleaved loop", strings.Repeat("Run. ", 10) + "then " + strings.Repeat("Run. ", 10) + "end of story here.", true},

		{"empty", "", false},
		{"citations", citations, false},
		{"report", report, false},
		{"prose", prose, false},
		{"tool call", toolCall, false},
		{"table", "Ports in use:\n\n" + table6, false},
		{"paths", paths, false},
		{"short run", "Run. Run. Run.", false},
		{"bullets", "- alpha\n- beta\n- gamma\n- delta\n- epsilon\n- zeta\n", false},
		{"checklist", "- [x] search\n- [x] read\n- [x] write\n- [x] test\n", false},
		{"short loop at end of long report", report + strings.Repeat("`", 60), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Mostly(tc.text); got != tc.want {
				t.Fatalf("Mostly = %v, want %v", got, tc.want)
			}
		})
	}
}

// checkLoop verifies Find's contract independently of its implementation:
// text[start:] is periodic with period unit and long enough to be a loop,
// and start is on a rune boundary.
func checkLoop(t *testing.T, text string, start, unit int) {
	t.Helper()
	if unit < 1 || unit > MaxUnit {
		t.Fatalf("unit %d outside [1, %d]", unit, MaxUnit)
	}
	if start < 0 || start+MinRepeats*unit > len(text) {
		t.Fatalf("start %d, unit %d: fewer than %d copies in %d bytes", start, unit, MinRepeats, len(text))
	}
	if len(text)-start < MinLoopBytes {
		t.Fatalf("loop covers %d bytes, want >= %d", len(text)-start, MinLoopBytes)
	}
	for i := start; i+unit < len(text); i++ {
		if text[i] != text[i+unit] {
			t.Fatalf("text[%d:] not periodic with %d: byte %d is %q, byte %d is %q",
				start, unit, i, text[i], i+unit, text[i+unit])
		}
	}
	if !utf8.RuneStart(text[start]) {
		t.Fatalf("start %d is inside a rune", start)
	}
	if utf8.ValidString(text) && !utf8.ValidString(text[:start+unit]) {
		t.Fatalf("salvage text[:%d] is not valid UTF-8", start+unit)
	}
}

func FuzzTail(f *testing.F) {
	for _, s := range []string{
		"", prose, toolCall, table6, paths, goCode, citations, "INC-2026-026",
		strings.Repeat("`", 60), strings.Repeat("Run. ", 12), strings.Repeat("the previouses of ", 6),
		"{\"query\": \"x" + strings.Repeat(" ", 60), "xʂ" + strings.Repeat("ł", 30),
		separatorRow(8, "---"), strings.Repeat("ab", 700), strings.Repeat("-", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		start, ok := Tail(text)
		if start < 0 || start > len(text) {
			t.Fatalf("start %d outside [0, %d]", start, len(text))
		}
		s2, unit, ok2 := Find(text)
		if s2 != start || ok2 != ok {
			t.Fatalf("Tail = (%d, %v), Find = (%d, %v)", start, ok, s2, ok2)
		}
		if !ok {
			if start != len(text) {
				t.Fatalf("no loop but start %d != len %d", start, len(text))
			}
		} else {
			checkLoop(t, text, start, unit)
			// Tail's contract only promises some period: check that
			// one in [1, MaxUnit] exists without trusting unit.
			periodic := false
			for p := 1; p <= MaxUnit && !periodic; p++ {
				periodic = start+p <= len(text)
				for i := start; periodic && i+p < len(text); i++ {
					periodic = text[i] == text[i+p]
				}
			}
			if !periodic {
				t.Fatalf("text[%d:] has no period <= %d", start, MaxUnit)
			}
		}
		// A text ending in MinLoopBytes copies of one ordinary byte is
		// always a loop.
		if n := len(text); n >= MinLoopBytes && !isRuleUnit(text[n-1:]) && utf8.RuneStart(text[n-1]) &&
			strings.Count(text[n-MinLoopBytes:], text[n-1:]) == MinLoopBytes && !ok {
			t.Fatalf("%d copies of %q at the end not found", MinLoopBytes, text[n-1:])
		}
		_ = Mostly(text)
	})
}

func BenchmarkTail(b *testing.B) {
	proseText := strings.Repeat(prose+"\n", 6)[:2048]
	loopText := (prose + "\n" + strings.Repeat("ab", 1024))[:2048]
	for _, bc := range []struct{ name, text string }{
		{"prose", proseText},
		{"loop", loopText},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				Tail(bc.text)
			}
		})
	}
}
