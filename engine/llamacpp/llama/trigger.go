package llama

/*
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"unsafe"
)

// maxTriggerBuffer bounds what a lazy grammar waiting for a word keeps of
// the turn: past it, only the tail a word could still complete in is kept.
const maxTriggerBuffer = 4096

// trigger finds where a lazy grammar's trigger appears in the turn, as
// llama.cpp's would (trigger.cpp says why lloyal does it): a word's first
// occurrence, or the first non-empty group of a pattern that matches the
// whole turn so far.
type trigger struct {
	words    [][]byte
	longest  int
	patterns []*regexp.Regexp
}

func newTrigger(g *Grammar) (*trigger, error) {
	t := &trigger{}
	for _, w := range g.TriggerWords {
		if w == "" {
			return nil, errors.New("grammar: an empty trigger word")
		}
		t.words = append(t.words, []byte(w))
		t.longest = max(t.longest, len(w))
	}
	for _, p := range g.TriggerPatterns {
		// Go's regexp runs in time linear in the text, without recursion,
		// and an anchored pattern (the formats' are) stops at the first
		// character it cannot match.
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return nil, fmt.Errorf("grammar: trigger pattern %q: %w", p, err)
		}
		t.patterns = append(t.patterns, re)
	}
	return t, nil
}

// check looks for the trigger after a token was accepted, and arms the
// grammar where it begins.
func (t *trigger) check(grammar *C.struct_llama_sampler) error {
	var data *C.char
	var n, last C.size_t
	if !C.lloyal_trigger_buffer(grammar, &data, &n, &last) || n == 0 {
		return nil // armed already, by a trigger token or earlier
	}
	// The grammar's own buffer, read in place: nothing changes it while
	// this runs.
	text := unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n))
	start := t.find(text, int(last))
	if start < 0 {
		if len(t.patterns) == 0 && int(n) > maxTriggerBuffer {
			C.lloyal_trigger_keep(grammar, C.size_t(t.longest-1))
		}
		return nil
	}
	var buf [256]C.char
	if C.lloyal_trigger_arm(grammar, C.size_t(start), &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("the grammar refused the text from its trigger on: %s", C.GoString(&buf[0]))
	}
	return nil
}

// find is the byte where the trigger begins in text, whose last token's
// piece begins at last; -1 when there is none yet. A word is looked for
// only where the last piece could have completed it: earlier text was
// looked at before.
func (t *trigger) find(text []byte, last int) int {
	for _, re := range t.patterns {
		m := re.FindSubmatchIndex(text)
		if m == nil {
			continue
		}
		for g := 1; g < len(m)/2; g++ {
			if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				return m[2*g]
			}
		}
		return m[0]
	}
	first := -1
	for _, w := range t.words {
		from := max(0, last-(len(w)-1))
		if i := bytes.Index(text[from:], w); i >= 0 && (first < 0 || from+i < first) {
			first = from + i
		}
	}
	return first
}

// waitingBytes is how much of the turn a lazy grammar waiting for its
// trigger holds (0 once armed).
func (s *Sampler) waitingBytes() int {
	var data *C.char
	var n, last C.size_t
	if s.grammar == nil || !C.lloyal_trigger_buffer(s.grammar, &data, &n, &last) {
		return 0
	}
	return int(n)
}
