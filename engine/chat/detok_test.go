package chat

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

const detokInput = "naïve 東京 🙂 ok"

// decodeChunks feeds chunks to a Decoder and returns the concatenated output,
// failing the test on any chunk that is not valid UTF-8 or any growth of the
// held bytes past one incomplete character.
func decodeChunks(t testing.TB, chunks [][]byte) string {
	t.Helper()
	var d Decoder
	var b strings.Builder
	for i, c := range chunks {
		s := d.Write(c)
		if !utf8.ValidString(s) {
			t.Fatalf("chunk %d: Write(%q) = %q, not valid UTF-8", i, c, s)
		}
		if len(d.pending) > utf8.UTFMax-1 {
			t.Fatalf("chunk %d: %d bytes held (%q), at most %d may be", i, len(d.pending), d.pending, utf8.UTFMax-1)
		}
		b.WriteString(s)
	}
	s := d.Flush()
	if !utf8.ValidString(s) {
		t.Fatalf("Flush() = %q, not valid UTF-8", s)
	}
	if len(d.pending) != 0 {
		t.Fatalf("Flush left %q held", d.pending)
	}
	b.WriteString(s)
	return b.String()
}

func TestDecoderEverySplit(t *testing.T) {
	in := []byte(detokInput)
	n := len(in)
	for i := 0; i <= n; i++ {
		for j := i; j <= n; j++ {
			chunks := [][]byte{in[:i], in[i:j], in[j:]}
			if got := decodeChunks(t, chunks); got != detokInput {
				t.Fatalf("cuts at %d,%d: got %q, want %q", i, j, got, detokInput)
			}
		}
	}
}

func TestDecoderByteAtATime(t *testing.T) {
	in := []byte(detokInput)
	var d Decoder
	var got strings.Builder
	for i := range in {
		s := d.Write(in[i : i+1])
		if !utf8.ValidString(s) {
			t.Fatalf("byte %d: %q is not valid UTF-8", i, s)
		}
		// Output only ever ends on a character boundary of the input.
		got.WriteString(s)
		if !strings.HasPrefix(detokInput, got.String()) {
			t.Fatalf("after byte %d output %q is not a prefix of the input", i, got.String())
		}
		// Once a character is complete it is released right away.
		if utf8.Valid(in[:i+1]) && got.Len() != i+1 {
			t.Fatalf("after byte %d (a character boundary) only %d bytes were released", i, got.Len())
		}
	}
	got.WriteString(d.Flush())
	if got.String() != detokInput {
		t.Errorf("got %q, want %q", got.String(), detokInput)
	}
}

func TestDecoderRandomChunks(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	in := []byte(strings.Repeat(detokInput+" ", 8))
	for iter := 0; iter < 500; iter++ {
		var chunks [][]byte
		for rest := in; len(rest) > 0; {
			k := rng.Intn(min(len(rest), 6) + 1) // empty chunks too
			chunks = append(chunks, rest[:k])
			rest = rest[k:]
		}
		if got := decodeChunks(t, chunks); got != string(in) {
			t.Fatalf("iteration %d: got %q, want %q", iter, got, in)
		}
	}
}

func TestDecoderInvalidBytes(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"lone 0xff", []string{"a", "\xff", "b"}, "a\uFFFDb"},
		{"0xff alone", []string{"\xff"}, "\uFFFD"},
		{"stray continuation", []string{"\x80", "x"}, "\uFFFDx"},
		{"truncated then ascii", []string{"\xe6\x9d", "A"}, "\uFFFDA"},
		{"truncated at end", []string{"ok\xf0\x9f\x99"}, "ok\uFFFD"},
		{"lead then new lead", []string{"\xe6", "\xe6\x9d\xb1"}, "\uFFFD東"},
		{"overlong", []string{"\xc0\xaf", "z"}, "\uFFFDz"},
		{"surrogate", []string{"\xed\xa0\x80"}, "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := make([][]byte, len(tt.chunks))
			for i, c := range tt.chunks {
				chunks[i] = []byte(c)
			}
			if got := decodeChunks(t, chunks); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// An invalid byte must not hold back the text after it. (0xFF is read as
// llama.cpp's grammar reads it, as the lead of a four-byte character: it is
// held only until a byte arrives that does not continue it.)
func TestDecoderInvalidDoesNotStall(t *testing.T) {
	var d Decoder
	if got := d.Write([]byte("\x80")); got != "\uFFFD" {
		t.Errorf("Write(0x80) = %q, want U+FFFD released at once", got)
	}
	d.Write([]byte("\xff"))
	if got := d.Write([]byte("hello")); got != "\uFFFDhello" {
		t.Errorf("Write(hello) after 0xff = %q", got)
	}
	if got := d.Write([]byte("\xe4\xb8")); got != "" {
		t.Errorf("incomplete character released early: %q", got)
	}
	if got := d.Write([]byte("\x96!")); got != "世!" {
		t.Errorf("completed character = %q, want %q", got, "世!")
	}
	if got := d.Flush(); got != "" {
		t.Errorf("Flush() = %q, want empty", got)
	}
}

// A lead byte and the continuation bytes it announces are one character, as
// llama.cpp's grammar counts them, even when the value is invalid (overlong,
// surrogate): one U+FFFD, so a string within a grammar's maxLength stays
// within it here. (Four U+FFFD for one grammar character broke maxLength.)
func TestInvalidSequenceIsOneCharacter(t *testing.T) {
	var d Decoder
	got := d.Write([]byte{0xF0, 0x8F}) + d.Write([]byte{0x80}) + d.Write([]byte{0x80, 'a'}) + d.Flush()
	if got != "\uFFFDa" {
		t.Fatalf("%q, want one U+FFFD then a", got)
	}
	got = d.Write([]byte{0xED, 0xA0, 0x80, 'b'}) + d.Flush() // a surrogate
	if got != "\uFFFDb" {
		t.Fatalf("%q", got)
	}
}
