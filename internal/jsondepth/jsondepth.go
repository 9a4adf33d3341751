// Package jsondepth measures how deeply a JSON text's objects and arrays
// nest, without recursion: a schema read by a recursive parser (llama.cpp's
// schema converter, in C++) must be refused before it is read when it nests
// too deeply.
package jsondepth

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// MaxSchema bounds how deeply a JSON Schema that reaches llama.cpp's
// converter may nest: it recurses once a level, so 40,000 levels (a 1 MiB
// harness file holds them) overflowed its stack and ended the process, and
// its grammar grows with the square of the depth (5,000 array levels wrote
// 187 MB). A tool's arguments nest a few levels.
const MaxSchema = 64

// Over reports whether b's objects and arrays nest deeper than limit,
// reading b as tokens and stopping at the first level past it; an error
// when b is not JSON.
func Over(b []byte, limit int) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth := 0
	for {
		t, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if depth != 0 {
				return false, io.ErrUnexpectedEOF
			}
			return false, nil
		}
		if err != nil {
			return false, err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > limit {
				return true, nil
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
