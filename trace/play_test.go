package trace

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A trace's event times are what its file says: an event at 285 years
// plays after the longest pause, not in 285 years (the playback's wait
// had no bound), and the events after it play.
func TestPlayCutsLongPauses(t *testing.T) {
	raw, err := os.ReadFile(v1Trace)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	lines[2] = regexp.MustCompile(`"t":\d+`).ReplaceAllString(lines[2], `"t":9000000000000000000`)
	path := filepath.Join(t.TempDir(), "far.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a minute is for ever here
	defer cancel()
	for _, speed := range []float64{1, 0.001} { // a slow speed overflows the pause
		var out bytes.Buffer
		if _, _, err := play(ctx, path, speed, false, &out, 10*time.Millisecond); err != nil || !strings.Contains(out.String(), "returned: alpha done") {
			t.Fatalf("speed %g: %v\n%s", speed, err, out.String())
		}
	}
}
