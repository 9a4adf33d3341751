package rerun

import (
	"fmt"
	"slices"
)

// Match says how two records' sampled tokens compare.
type Match struct {
	Agents, Tokens int
}

// Compare checks that b's agents sampled exactly a's tokens: the same
// agents, each the same ids in the same order. The error names the first
// agent and token that differ.
func Compare(a, b *Record) (Match, error) {
	var m Match
	ids := make([]int, 0, len(a.Sampled))
	for id := range a.Sampled {
		ids = append(ids, id)
	}
	for id := range b.Sampled {
		if _, ok := a.Sampled[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		x, y := a.Sampled[id], b.Sampled[id]
		for i := range min(len(x), len(y)) {
			if x[i] != y[i] {
				return m, fmt.Errorf("agent %d's token %d differs: %d in %s, %d in %s", id, i+1, x[i], a.Path, y[i], b.Path)
			}
		}
		if len(x) != len(y) {
			return m, fmt.Errorf("agent %d sampled %d tokens in %s and %d in %s", id, len(x), a.Path, len(y), b.Path)
		}
		m.Agents++
		m.Tokens += len(x)
	}
	return m, nil
}
