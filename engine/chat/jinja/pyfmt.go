package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyFloat formats f as Python's repr(float) and str(float) do: the
// shortest round-tripping digits, always with a decimal point or an
// exponent ("2.0", "0.1", "1e+16", "1e-05"), "inf" and "nan".
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e // Go writes at least two exponent digits, as Python does
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyStrRepr quotes s as Python's repr(str) does: single quotes unless s
// holds a single quote and no double quote, and backslash escapes for
// the quote, backslashes and unprintable characters.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + hex2(int(r)))
		case r >= 0x80 && !pyPrintable(r):
			switch {
			case r <= 0xff:
				b.WriteString(`\x` + hex2(int(r)))
			case r <= 0xffff:
				b.WriteString(`\u` + strconv.FormatInt(int64(r)+0x10000, 16)[1:])
			default:
				b.WriteString(`\U` + strconv.FormatInt(int64(r)+0x100000000, 16)[1:])
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func hex2(n int) string { return strconv.FormatInt(int64(n)+0x100, 16)[1:] }

// pyPrintable approximates Python's str.isprintable for one character:
// letters, marks, numbers, punctuation, symbols and the plain space.
func pyPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// pySplitlines splits s at every line boundary Python's str.splitlines
// knows, dropping the boundaries (and so a final empty line).
func pySplitlines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= 0x80 {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		switch r {
		case '\r':
			end := i
			i++
			if i < len(s) && s[i] == '\n' {
				i++
			}
			lines = append(lines, s[start:end])
			start = i
			continue
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			lines = append(lines, s[start:i])
			i += n
			start = i
			continue
		}
		i += n
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// isPySpace is Python's str.isspace for one character (what str.strip and
// str.split strip and split on).
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85:
		return true
	}
	return r > 0x7f && unicode.IsSpace(r)
}

// unescapePy decodes the body of a template string literal as jinja2 does:
// the text is encoded with Python's "backslashreplace" and decoded with
// "unicode-escape". So a backslash before a newline drops both, the C
// escapes, octal, \xhh, \uhhhh and \Uhhhhhhhh are decoded, an unknown
// escape keeps its backslash, and a backslash before a non-ASCII character
// leaves that character's own escape text (Python's quirk, kept).
func unescapePy(raw string) (string, error) {
	if !strings.Contains(raw, `\`) {
		return raw, nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return "", fmt.Errorf("\\ at end of string")
		}
		e := raw[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && i < len(raw) && raw[i] >= '0' && raw[i] <= '7'; k++ {
				n = n*8 + int(raw[i]-'0')
				i++
			}
			b.WriteRune(rune(n))
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+digits > len(raw) {
				return "", fmt.Errorf("truncated \\%c escape", e)
			}
			n, err := strconv.ParseUint(raw[i:i+digits], 16, 32)
			if err != nil || strings.ContainsAny(raw[i:i+digits], "+-_") {
				return "", fmt.Errorf("truncated \\%c escape", e)
			}
			if n > unicode.MaxRune {
				return "", fmt.Errorf("illegal Unicode character")
			}
			b.WriteRune(rune(n))
			i += digits
		default:
			if e < 0x80 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			// backslashreplace wrote the character as \xhh, \uhhhh or
			// \Uhhhhhhhh; the decoder read "\\" and kept the rest as text.
			r, n := utf8.DecodeRuneInString(raw[i-1:])
			i += n - 1
			b.WriteByte('\\')
			switch {
			case r <= 0xff:
				b.WriteString("x" + hex2(int(r)))
			case r <= 0xffff:
				b.WriteString("u" + strconv.FormatInt(int64(r)+0x10000, 16)[1:])
			default:
				b.WriteString("U" + strconv.FormatInt(int64(r)+0x100000000, 16)[1:])
			}
		}
	}
	return b.String(), nil
}

// IsSpace reports whether r is whitespace to Python's str.strip (what a
// template's trim and strip remove): Unicode white space and the
// separators \x1c to \x1f.
func IsSpace(r rune) bool { return isPySpace(r) }
