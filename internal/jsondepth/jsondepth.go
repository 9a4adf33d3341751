// Package jsondepth measures what makes a JSON Schema costly for a
// recursive reader, without recursion: how deeply its objects and arrays
// nest, and how many "$ref" keys it holds. llama.cpp's schema converter (in
// C++) recurses once a level and once a reference, so a schema past either
// bound must be refused before it reads it.
package jsondepth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Limits bound a schema's Shape.
type Limits struct {
	Depth, Refs int
	// RefBytes bounds the references times the schema's bytes: the
	// converter copies the whole schema for each reference it follows.
	RefBytes int
}

// Converter bounds a schema that reaches llama.cpp's converter. It
// recursed once a level, so 40,000 levels (a 1 MiB harness file holds
// them) overflowed its stack and ended the process, and its grammar grows
// with the square of the depth (5,000 array levels wrote 187 MB); it
// follows a $ref by recursing too, copying the whole schema each time. A
// call's schema holds every tool's parameters (chat.CallSchema).
var Converter = Limits{Depth: 64, Refs: 1024, RefBytes: 64 << 20}

// Tool bounds one tool's parameters: a call's schema wraps them in four
// more levels (chat.CallSchema), with room left, and a tool's arguments
// nest a few levels and refer to a few definitions.
var Tool = Limits{Depth: Converter.Depth - 8, Refs: 64, RefBytes: Converter.RefBytes}

// Shape is what Measure finds.
type Shape struct {
	Depth int // of the deepest object or array, 1 for {}
	Refs  int // "$ref" keys, at any depth
}

// Measure reads b as tokens, once, and returns its Shape; an error when b
// is not one JSON value.
func Measure(b []byte) (Shape, error) {
	type frame struct{ object, wantKey bool }
	var sh Shape
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		t, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 {
				return sh, io.ErrUnexpectedEOF
			}
			return sh, nil
		}
		if err != nil {
			return sh, err
		}
		// A value ended: the object holding it wants a key next.
		ended := func() {
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
		}
		switch t {
		case json.Delim('}'), json.Delim(']'):
			if len(stack) == 0 {
				return sh, errors.New("a closing bracket without its opening one")
			}
			stack = stack[:len(stack)-1]
			ended()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if t == "$ref" {
				sh.Refs++
			}
			stack[n-1].wantKey = false
			continue
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default:
			ended()
			continue
		}
		sh.Depth = max(sh.Depth, len(stack))
	}
}

// Check is nil when b is a JSON value within l, or says which bound it
// passes.
func Check(b []byte, l Limits) error {
	sh, err := Measure(b)
	switch {
	case err != nil:
		return err
	case sh.Depth > l.Depth:
		return fmt.Errorf("it nests %d levels deep, past %d", sh.Depth, l.Depth)
	case sh.Refs > l.Refs:
		return fmt.Errorf("it holds %d $ref references, past %d", sh.Refs, l.Refs)
	case sh.Refs*len(b) > l.RefBytes:
		return fmt.Errorf("its %d $ref references in %d bytes would be followed by copying it each time, past %d MiB", sh.Refs, len(b), l.RefBytes>>20)
	}
	return nil
}
