package termtext

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCleanEscapesTerminalControl(t *testing.T) {
	if got := Clean("a\x1b]0;x\x07\r\nb\tc"); strings.ContainsAny(got, "\x1b\x07\r\n\t") {
		t.Fatalf("%q", got)
	}
}

// Runes terminals draw at widths of their own (private use, unassigned,
// bidi and zero-width format characters) are escaped, so they can neither
// shift a border nor reorder a line; ordinary letters, accents and CJK stay.
func TestEscapeUndrawableRunes(t *testing.T) {
	for in, want := range map[string]string{
		"a\U00095526b":      `a\u{95526}b`,
		"x\ue000y":          `x\u{e000}y`,
		"evil\u202etxt.exe": `evil\u{202e}txt.exe`,
		"zw\u200bj":         `zw\u{200b}j`,
		"καλή ţ 日本 e\u0301": "καλή ţ 日本 e\u0301",
	} {
		if got := Escape(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// Writer applies Escape's rule to a stream, holding a rune split
// across writes until it is whole; the JSON writer keeps JSON valid.
func TestWriterEscapesAStream(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	in := "ok 日本\x1b]2;X\x07\x1b[2J\u202e\x9b\n"
	for i := 0; i < len(in); i++ { // a byte at a time: every rune split
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), Escape(in); got != want {
		t.Fatalf("streamed %q, want %q", got, want)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\u202e\u009b") {
		t.Fatalf("raw control left: %q", b.String())
	}
	b.Reset()
	raw, _ := json.Marshal(map[string]string{"name": "a\x7f\u009b\u200b\U000F0000\x1b"})
	jw := NewJSONWriter(&b)
	jw.Write(raw)
	var back map[string]string
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back["name"] != "a\x7f\u009b\u200b\U000F0000\x1b" {
		t.Fatalf("JSON %q does not decode to the same value: %v %q", b.String(), err, back["name"])
	}
	if !safe(b.String()) {
		t.Fatalf("JSON output %q still holds runes a terminal acts on", b.String())
	}
}

// EscapeKeepingSGR keeps colour sequences and escapes every other control:
// an OSC 52 clipboard write, a carriage return, a bidi override, a CSI
// that moves the cursor.
func TestEscapeKeepingSGR(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\x1b[38;5;252mplain\x1b[0m", "\x1b[38;5;252mplain\x1b[0m"},
		{"\x1b]52;c;QUJD\x07", `\x1b]52;c;QUJD\x07`},
		{"a\rb", `a\x0db`},
		{"\u202eevil", `\u{202e}evil`},
		{"\x1b[2J\x1b[1m", `\x1b[2J` + "\x1b[1m"},
		{"\x1b[", `\x1b[`},
	} {
		if got := EscapeKeepingSGR(c.in); got != c.want {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}
