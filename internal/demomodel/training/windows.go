package training

// window is one training sequence: ctx+1 tokens and, per target, whether it
// is the model's own (learned) or the runtime's (read only).
type window struct {
	tokens []int32
	learn  []bool
}

// tokenPiece is a transcript piece as tokens: the runtime's, or the model's.
type tokenPiece struct {
	tokens []int32
	model  bool
}

// cutWindows cuts a transcript (its first piece the spine, its second the
// task) into windows of ctxLen+1 tokens ending at the model's turns: the
// last turn first, then each earlier turn no window has learned yet. A turn
// (the model's consecutive pieces: a call and its stop) is learned in a
// window only when the window also holds what it answers, the runtime's
// piece before it, so no turn is taught without the words it copies from.
func cutWindows(pieces []tokenPiece, ctxLen int) []window {
	var toks []int32
	type turn struct{ from, input, end int }
	var turns []turn
	input := 0
	for i, p := range pieces {
		if !p.model && (i <= 1 || pieces[i-1].model) {
			input = len(toks) // the task after the spine, or a result after a call
		}
		if p.model && len(p.tokens) > 0 {
			if n := len(turns); n > 0 && turns[n-1].end == len(toks) {
				turns[n-1].end += len(p.tokens)
			} else {
				turns = append(turns, turn{from: len(toks), input: input, end: len(toks) + len(p.tokens)})
			}
		}
		toks = append(toks, p.tokens...)
	}
	var out []window
	learned := make([]bool, len(turns))
	for k := len(turns) - 1; k >= 0; k-- {
		end := turns[k].end
		start := end - ctxLen - 1
		if learned[k] || start < 0 || turns[k].input < start {
			continue // learned already, too short a transcript, or its input does not fit
		}
		w := window{tokens: toks[start:end], learn: make([]bool, ctxLen)}
		for j := 0; j <= k; j++ {
			if learned[j] || turns[j].input < start {
				continue
			}
			learned[j] = true
			for i := max(turns[j].from, start+1); i < turns[j].end; i++ {
				w.learn[i-start-1] = true
			}
		}
		out = append(out, w)
	}
	return out
}
