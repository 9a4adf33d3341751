package jinja

import (
	"fmt"
	"math/big"
)

// A chat template comes with a model file from anywhere, and what Go
// cannot recover from (memory run out, a stack overflowed) would take the
// program with it: a render is bounded instead, each bound an error
// naming it.
const (
	// maxSteps bounds the nodes one render executes (a chat template's
	// render executes thousands; 2,000,000 take about a second).
	maxSteps = 2_000_000
	// maxDepth bounds macro calls in progress (a macro may call itself).
	maxDepth = 200
	// maxValue bounds a render's output in bytes, and a repeated string's
	// bytes or a repeated list's items.
	maxValue = 32 << 20
	// maxRange is jinja2's sandbox MAX_RANGE: the most items range() gives.
	maxRange = 100_000
	// maxNesting bounds an expression's nesting as it is parsed (brackets,
	// not, unary signs), which recurses once a level.
	maxNesting = 500
	// maxIndent bounds a width the template asks of indent and tojson.
	maxIndent = 1 << 10
)

// nest counts an expression opened while parsing (unnest when it closes).
func (p *exprParser) nest() error {
	if p.depth++; p.depth > maxNesting {
		return fmt.Errorf("the expression nests more than %d deep", maxNesting)
	}
	return nil
}

func (p *exprParser) unnest() { p.depth-- }

// concatenated is a + b as one string, or an error past maxValue.
func concatenated(a, b string) (Value, error) {
	if len(a)+len(b) > maxValue {
		return Undefined(), fmt.Errorf("MemoryError: a string of %d bytes is over %d MiB", len(a)+len(b), maxValue>>20)
	}
	return NewString(a + b), nil
}

// checkIndent refuses a width over maxIndent.
func checkIndent(n int64) error {
	if n > maxIndent {
		return fmt.Errorf("an indent of %d is over %d", n, maxIndent)
	}
	return nil
}

// limits is one render's budget, shared by the evaluators of its macro and
// block bodies.
type limits struct {
	steps, depth int
}

// step counts one node executed by an evaluator whose output holds out
// bytes.
func (l *limits) step(out int) error {
	l.steps++
	switch {
	case l.steps > maxSteps:
		return fmt.Errorf("the template executed more than %d steps: it does not end (a loop without end?)", maxSteps)
	case out > maxValue:
		return fmt.Errorf("the template wrote more than %d MiB", maxValue>>20)
	}
	return nil
}

// enter counts a macro call begun (leave when it returns).
func (l *limits) enter() error {
	if l.depth++; l.depth > maxDepth {
		l.depth--
		return fmt.Errorf("RecursionError: macros called more than %d deep", maxDepth)
	}
	return nil
}

func (l *limits) leave() { l.depth-- }

// rangeLen is how many items range(start, stop, step) gives (step not 0),
// counted without overflow.
func rangeLen(start, stop, step int64) int64 {
	d := new(big.Int).Sub(big.NewInt(stop), big.NewInt(start))
	s := big.NewInt(step)
	if d.Sign() == 0 || d.Sign() != s.Sign() {
		return 0
	}
	// ceil(d / s) for d and s of one sign.
	n := new(big.Int).Quo(new(big.Int).Sub(new(big.Int).Add(d, s), big.NewInt(int64(s.Sign()))), s)
	if !n.IsInt64() {
		return 1 << 62
	}
	return n.Int64()
}
