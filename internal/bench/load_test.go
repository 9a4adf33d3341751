package bench

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"testing"
)

// Other programs' share counts the machine's busy time less this process's
// own: a bench that keeps both cores busy itself is quiet.
func TestOthersShare(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b cpuSample
		want float64
	}{
		{"all ours", cpuSample{busy: 100, total: 400, self: 50}, cpuSample{busy: 500, total: 800, self: 450}, 0},
		{"a quarter theirs", cpuSample{busy: 100, total: 200, self: 10}, cpuSample{busy: 300, total: 600, self: 110}, 0.25},
		{"idle", cpuSample{busy: 100, total: 200}, cpuSample{busy: 100, total: 600}, 0},
		{"no time passed", cpuSample{busy: 100, total: 200}, cpuSample{busy: 100, total: 200}, 0},
	} {
		if got := othersShare(c.a, c.b); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// On Linux the meter reads both files, and this process's own CPU time
// grows with work it does.
func TestReadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	a, ok := readCPU()
	if !ok || a.total == 0 {
		t.Fatalf("readCPU: %+v %v", a, ok)
	}
	x := 0
	for b := a; b.self == a.self; b, _ = readCPU() {
		x++ // spin until the kernel charges us a tick
	}
	_ = x
}

// The start line comes before a bench's first output, once; a bench that
// writes nothing says nothing of the load.
func TestBenchStartLineWaitsForOutput(t *testing.T) {
	var w bytes.Buffer
	s := &startLine{w: &w, line: "load at start: 1\n"}
	if w.Len() != 0 {
		t.Fatalf("written before any output: %q", w.String())
	}
	fmt.Fprint(s, "row 1\n")
	fmt.Fprint(s, "row 2\n")
	if w.String() != "load at start: 1\nrow 1\nrow 2\n" {
		t.Fatalf("start line: %q", w.String())
	}
}
