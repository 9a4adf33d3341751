// Package termtext makes text from files, models and traces safe for a
// terminal: control characters and runes terminals draw differently become
// visible escapes, so nothing an agent or a file says can repaint or retitle
// the screen. Escape is lloyal's one rule; EscapeJSON writes it in JSON's
// notation; Writer applies it to a stream.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Clean makes text safe to print on one line of a terminal: control
// characters become visible escapes (Escape); newlines become "⏎ ".
func Clean(s string) string {
	return strings.NewReplacer("\n", "⏎ ", "\t", "  ").Replace(Escape(s))
}

// Escape makes control characters (ESC, BEL, carriage returns, C1 codes …)
// visible as \xNN so text from a model or a tool can neither repaint nor
// retitle a terminal. Newlines and tabs are kept for the caller to lay out.
// Runes whose width terminals disagree on — private-use, unassigned and
// format characters (bidi overrides, zero-width joiners) — become \u{…}
// too: they would shift a pane's border, or reorder what is shown. Bytes
// that are not UTF-8 become \u{fffd}. This is lloyal's one rule for text
// from a file, a model or a trace; EscapeJSON writes the same runes in
// JSON's notation, and Writer applies it to a stream.
func Escape(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafe(r):
			b.WriteRune(r)
		case r < 0xa0:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u{%x}", r)
		}
	}
	return b.String()
}

// EscapeKeepingSGR is Escape for text lloyal styled itself after reading
// it (glamour's rendering of a report): its colour sequences (CSI … m)
// are kept, every other control escaped. The renderer decodes character
// references, so "&#27;]52;…" in a model's Markdown reaches its output as
// a raw ESC whatever was escaped before.
func EscapeKeepingSGR(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		if n := sgrLen(s); n > 0 {
			b.WriteString(s[:n])
			s = s[n:]
			continue
		}
		i := strings.IndexByte(s[1:], 0x1b) + 1
		if i == 0 {
			i = len(s)
		}
		b.WriteString(Escape(s[:i]))
		s = s[i:]
	}
	return b.String()
}

// sgrLen is the length of the SGR sequence s starts with (ESC [ digits,
// ';' or ':' … m), or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 64; i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case c >= '0' && c <= '9', c == ';', c == ':':
		default:
			return 0
		}
	}
	return 0
}

// EscapeJSON writes the runes Escape escapes as JSON \uXXXX escapes (a
// surrogate pair above the BMP), for JSON bound for a terminal: such runes
// only occur inside JSON strings, where the escape means the same rune, so
// the JSON stays valid and decodes to the same value.
func EscapeJSON(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t' || !unsafe(r):
			b.WriteRune(r) // newlines and tabs are JSON's own whitespace here
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// unsafe reports whether Escape rewrites r.
func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r < 0x7f:
		return false
	}
	return r == utf8.RuneError || unicode.In(r, unicode.Co, unicode.Cf, unicode.Cs) || !unicode.In(r, drawn...)
}

// safe reports whether s needs no escaping (the common case, checked fast).
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return safeSlow(s[i:])
		}
	}
	return true
}

func safeSlow(s string) bool {
	for _, r := range s {
		if unsafe(r) {
			return false
		}
	}
	return true
}

// Writer escapes everything written through it by Escape's rule
// before it reaches w: the sink every command's text goes through on its way
// to a terminal, so no string from a file, a model or a trace can drive the
// terminal, whichever code path printed it. A rune split across two writes
// is held until it is whole. It is safe for concurrent use (a run's
// signal handler, prompter and log share stderr).
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
	held []byte
}

// NewWriter returns a Writer writing text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewJSONWriter returns a Writer for JSON text: it escapes
// with EscapeJSON, so what reaches w is still valid JSON.
func NewJSONWriter(w io.Writer) *Writer { return &Writer{w: w, json: true} }

// Write escapes p and writes it; it reports len(p) written when w took it all.
func (t *Writer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := append(t.held, p...)
	cut := len(buf)
	// Hold back an incomplete rune at the end (at most 3 bytes).
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	s := string(buf[:cut])
	t.held = append(t.held[:0:0], buf[cut:]...)
	out := Escape(s)
	if t.json {
		out = EscapeJSON(s)
	}
	if _, err := io.WriteString(t.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a rune held back incomplete (escaped as the bytes it is).
func (t *Writer) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) == 0 {
		return nil
	}
	s := string(t.held)
	t.held = nil
	_, err := io.WriteString(t.w, Escape(s))
	return err
}

// drawn are the categories of assigned runes a terminal draws.
var drawn = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs}
