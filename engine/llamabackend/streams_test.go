package llamabackend

import (
	"strings"
	"testing"
)

// ChooseStreams gives a stream per agent only to agents that hold
// conversations, and only when each branch's stream holds its share.
func TestChooseStreams(t *testing.T) {
	for _, c := range []struct {
		name                  string
		nCtx, branches, share int
		conversations         bool
		want                  int
		says                  string
	}{
		{"the demo's default context", 16384, 5, 8192, true, 0, "one shared cache: a stream for each of 5 branches would hold 3276 cells"},
		{"room for every branch", 65536, 5, 8192, true, 8, "a stream per agent: 8 streams of 8192 cells"},
		{"exactly enough", 40960, 5, 8192, true, 5, "5 streams"},
		{"one short", 32768, 5, 8192, true, 0, "one shared cache"},
		{"free text", 65536, 5, 8192, false, 0, "without tool results"},
		{"capped", 1 << 20, 5, 8192, true, MaxStreams, "64 streams of 16384"},
		{"one branch needs two streams", 8192, 1, 8192, true, 0, "one shared cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ChooseStreams(c.nCtx, c.branches, c.share, c.conversations)
			if got.Streams != c.want || !strings.Contains(got.Why, c.says) {
				t.Fatalf("ChooseStreams(%d, %d, %d, %v) = %+v, want %d streams saying %q", c.nCtx, c.branches, c.share, c.conversations, got, c.want, c.says)
			}
		})
	}
}
