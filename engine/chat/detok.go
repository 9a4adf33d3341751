package chat

import (
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
func (d *Decoder) Write(piece []byte) string {
	d.pending = append(d.pending, piece...)
	cut := completePrefix(d.pending)
	out := d.pending[:cut]
	s := strings.ToValidUTF8(string(out), "\uFFFD")
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return s
}

// Flush returns whatever is held (an unfinished character becomes U+FFFD).
func (d *Decoder) Flush() string {
	s := strings.ToValidUTF8(string(d.pending), "\uFFFD")
	d.pending = d.pending[:0]
	return s
}

// completePrefix is the length of b without a trailing, possibly still
// valid, incomplete UTF-8 sequence.
func completePrefix(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c&0xC0 == 0x80 { // continuation byte: keep looking for the lead
			continue
		}
		need := 0
		switch {
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		}
		if need > back && utf8.FullRune(b[len(b)-back:]) == false {
			return len(b) - back
		}
		return len(b)
	}
	return len(b)
}
