package bench

import (
	"strings"
	"testing"
	"time"
)

// The limit is the slower of the two bounds, each bytes or operations over
// the rate measured for it; the line says both and which holds.
func TestStepLimitIsTheSlowerBound(t *testing.T) {
	for _, c := range []struct {
		name string
		l    stepLimit
		want time.Duration
	}{
		{"memory-bound", stepLimit{weights: 1e9, bandwidth: 50e9, flops: 1e9, peak: 100e9}, 20 * time.Millisecond},
		{"compute-bound", stepLimit{weights: 1e8, bandwidth: 50e9, flops: 4e9, peak: 100e9}, 40 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.l.step(); got != c.want {
				t.Fatalf("step limit %v, want %v", got, c.want)
			}
			if s := c.l.String(); !strings.Contains(s, "no step can take less than "+strings.TrimSuffix(c.want.String(), "ms")+".0 ms") {
				t.Fatalf("the line does not say the limit: %s", s)
			}
		})
	}
	if bw := readBandwidth(1); bw <= 0 {
		t.Fatalf("bandwidth %g", bw)
	}
}
