package training

import (
	"reflect"
	"testing"
)

// cutWindows learns a turn only in a window that also holds the runtime's
// piece it answers, learns each turn once, and ends a window at the last
// turn not yet learned.
func TestCutWindows(t *testing.T) {
	// piece builds n tokens numbered from first, the model's or not.
	piece := func(first, n int, model bool) tokenPiece {
		p := tokenPiece{model: model}
		for i := range n {
			p.tokens = append(p.tokens, int32(first+i))
		}
		return p
	}
	// A transcript: spine 0-9, task 10-12, call 13-14 + stop 15, result
	// 16-21, call 22-23 + stop 24, result 25-26, report 27-28.
	tr := []tokenPiece{piece(0, 10, false), piece(10, 3, false), piece(13, 2, true), piece(15, 1, true), piece(16, 6, false),
		piece(22, 2, true), piece(24, 1, true), piece(25, 2, false), piece(27, 2, true)}
	learnedTokens := func(ws []window) [][]int32 {
		var out [][]int32
		for _, w := range ws {
			var l []int32
			for i, on := range w.learn {
				if on {
					l = append(l, w.tokens[i+1])
				}
			}
			out = append(out, l)
		}
		return out
	}
	for _, c := range []struct {
		name string
		ctx  int
		want [][]int32 // per window, the tokens learned
	}{
		{"all in one window", 28, [][]int32{{13, 14, 15, 22, 23, 24, 27, 28}}},
		{"the first call's task falls out", 15, [][]int32{{22, 23, 24, 27, 28}, {13, 14, 15}}},
		{"only the report fits with its input", 4, [][]int32{{27, 28}}},
		{"the report's input does not fit", 2, nil},
	} {
		ws := cutWindows(tr, c.ctx)
		for _, w := range ws {
			if len(w.tokens) != c.ctx+1 || len(w.learn) != c.ctx {
				t.Fatalf("%s: a window of %d tokens and %d targets, want %d and %d", c.name, len(w.tokens), len(w.learn), c.ctx+1, c.ctx)
			}
		}
		if got := learnedTokens(ws); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: learned %v, want %v", c.name, got, c.want)
		}
	}
}
