package chat

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Decoder turns a stream of token pieces into text without ever splitting a
// UTF-8 character: bytes of a character that is not complete yet are held
// until the tokens that finish it arrive. Byte-fallback tokenizers emit
// multi-byte characters one byte per token, so this matters for any non-ASCII
// text.
type Decoder struct {
	pending []byte
}

// Write adds a piece and returns the text that is now complete.
//
// Bytes that are not UTF-8 become U+FFFD, one per character as llama.cpp's
// grammar counts characters: a lead byte and the continuation bytes it
// announces are one character even when their value is not valid (overlong,
// a surrogate, past U+10FFFF). So a string the grammar let through with at
// most N characters has at most N runes here, and a schema's maxLength
// holds on both sides.
func (d *Decoder) Write(piece []byte) string {
	d.pending = append(d.pending, piece...)
	var b strings.Builder
	i := 0
	for i < len(d.pending) {
		c := d.pending[i]
		n := seqLen(c)
		if n == 1 {
			b.WriteByte(c)
			i++
			continue
		}
		if n == 0 { // a continuation byte with no lead, or no lead at all
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		k := 1 // continuation bytes that follow the lead, up to n-1
		for k < n && i+k < len(d.pending) && d.pending[i+k]&0xC0 == 0x80 {
			k++
		}
		switch {
		case k == n:
			if seq := d.pending[i : i+n]; utf8.Valid(seq) {
				b.Write(seq)
			} else {
				b.WriteRune(utf8.RuneError)
			}
			i += n
		case i+k == len(d.pending):
			// Incomplete so far: the next piece may finish it.
			d.pending = append(d.pending[:0], d.pending[i:]...)
			return b.String()
		default: // cut short by a byte that does not continue it
			b.WriteRune(utf8.RuneError)
			i += k
		}
	}
	d.pending = d.pending[:0]
	return b.String()
}

// seqLen is how many bytes a sequence starting with c has, as llama.cpp's
// grammar decodes UTF-8 (0: c is a continuation byte; 0xF8–0xFF, which
// start nothing valid, are read as four-byte leads, as the grammar does).
func seqLen(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0xC0:
		return 0
	case c < 0xE0:
		return 2
	case c < 0xF0:
		return 3
	}
	return 4
}

// Flush returns whatever is held (an unfinished character becomes U+FFFD).
func (d *Decoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.pending = d.pending[:0]
	return "\uFFFD"
}

// Clone is a decoder holding what d holds, sharing no memory with it.
func (d *Decoder) Clone() Decoder { return Decoder{pending: slices.Clone(d.pending)} }
