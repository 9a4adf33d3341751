package llama

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/internal/gguf"
	"github.com/lloyal-ai/lloyal/internal/gputest"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/internal/testproc"
)

func TestParseGPULayers(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		all  bool
		fail bool
	}{
		{"-1", 0, true, false},
		{"all", 0, true, false},
		{" ALL ", 0, true, false},
		{"0", 0, false, false},
		{"12", 12, false, false},
		{"-2", 0, false, true},
		{"many", 0, false, true},
		{"", 0, false, true},
	} {
		g, err := ParseGPULayers(c.in)
		if c.fail {
			if err == nil || !strings.Contains(err.Error(), "--gpu-layers 0") {
				t.Errorf("%q: err %v, want one that names the values that work", c.in, err)
			}
			continue
		}
		if n, all := g.Count(); err != nil || n != c.n || all != c.all {
			t.Errorf("%q: %d all=%v err %v, want %d all=%v", c.in, n, all, err, c.n, c.all)
		}
	}
	// The zero value is every layer, as llama.cpp and ollama default;
	// CPUOnly and Layers(0) are none; a negative count is every layer.
	if _, all := (GPULayers{}).Count(); !all {
		t.Error("the zero GPULayers: want every layer")
	}
	if n, all := CPUOnly.Count(); all || n != 0 || CPUOnly.String() != "0" {
		t.Errorf("CPUOnly: %d all=%v %q", n, all, CPUOnly)
	}
	if Layers(-5) != AllLayers || AllLayers.String() != "-1" || Layers(7).String() != "7" {
		t.Error("Layers/String do not round-trip --gpu-layers values")
	}
}

func TestLibraryDirs(t *testing.T) {
	t.Setenv(LibraryPathEnv, "/a/lib"+string(os.PathListSeparator)+string(os.PathListSeparator)+"/b/lib")
	if got := LibraryDirs(); !slices.Equal(got, []string{"/a/lib", "/b/lib"}) {
		t.Errorf("%s=/a/lib::/b/lib: %v", LibraryPathEnv, got)
	}
	// Set and empty: no GPU backend at all.
	t.Setenv(LibraryPathEnv, "")
	if got := LibraryDirs(); len(got) != 0 {
		t.Errorf("%s empty: %v, want none", LibraryPathEnv, got)
	}
	// Unset: lib/lloyal beside the binary's folder (bin/lloyal → lib/lloyal).
	os.Unsetenv(LibraryPathEnv)
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	want := filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", "lloyal")
	if got := LibraryDirs(); len(got) != 1 || got[0] != want {
		t.Errorf("unset: %v, want [%s]", got, want)
	}
}

// childEnv names what a re-run of this test binary does instead of its
// tests (ggml's backends load once per process, so a test of loading runs
// in a process of its own).
const childEnv = "LLOYAL_LLAMA_TEST_CHILD"

// A backend library that does not load (here not an ELF file at all) is a
// message and a run on the CPU, never an abort; a count of layers asked of
// a machine without a GPU says so.
func TestBrokenBackendRunsOnTheCPU(t *testing.T) {
	if os.Getenv(childEnv) == "broken" {
		brokenBackendChild(t)
		return
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "libggml-vulkan.so"), []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBrokenBackendRunsOnTheCPU$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=broken", LibraryPathEnv+"="+dir, "LLOYAL_TEST_TINY="+testmodel.Tiny(t))
	testproc.Tie(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
}

func brokenBackendChild(t *testing.T) {
	libs := Backends()
	if len(libs) != 1 || libs[0].Err == nil || !strings.Contains(libs[0].Err.Error(), "did not load") {
		t.Fatalf("backends: %+v, want the vulkan library with why it did not load", libs)
	}
	if _, ok := OffloadDevice(); ok {
		t.Fatal("a GPU device from a library that did not load")
	}
	for _, g := range []GPULayers{AllLayers, Layers(4)} {
		m, err := LoadModel(os.Getenv("LLOYAL_TEST_TINY"), ModelParams{GPULayers: g})
		if err != nil {
			t.Fatal(err)
		}
		off := m.Offload()
		m.Close()
		if off.OnGPU() || off.String() != "CPU" || !strings.Contains(off.Note, "did not load") {
			t.Errorf("--gpu-layers %s: %+v, want the CPU and a note of the library", g, off)
		}
		if _, all := g.Count(); !all && !strings.Contains(off.Note, "asks for a GPU, and there is none") {
			t.Errorf("--gpu-layers %s: note %q, want it to say there is no GPU", g, off.Note)
		}
	}
}

// finishOffload notes a partial fit only when every layer was asked for.
func TestFinishOffload(t *testing.T) {
	o := finishOffload(Offload{Device: "Vulkan0 (x)", Layers: 999, all: true}, 12)
	if o.Layers != 13 || o.Of != 13 || o.Note != "" || o.String() != "Vulkan0 (x), 13/13 layers" {
		t.Errorf("all fit: %+v %q", o, o)
	}
	o = finishOffload(Offload{Device: "Vulkan0 (x)", Layers: 5, all: true}, 12)
	if !strings.Contains(o.Note, "only 5 of the model's 13 layers fit") {
		t.Errorf("part fit: note %q", o.Note)
	}
	o = finishOffload(Offload{Device: "Vulkan0 (x)", Layers: 5}, 12)
	if o.Note != "" || o.Layers != 5 {
		t.Errorf("5 asked for: %+v, want no note", o)
	}
	if o := finishOffload(Offload{}, 12); o.OnGPU() || o.String() != "CPU" {
		t.Errorf("the CPU: %+v", o)
	}
}

// Fitting to the device's free memory: with room for the whole model
// beside the context every layer goes to the device; with room for part,
// the layers that fit, and a note that says so; with room for none, the
// CPU and a note. Mesa's software device stands in for a GPU (its memory
// is made scarce by the margin the fit leaves free).
func TestOffloadFitsWhatFits(t *testing.T) {
	if os.Getenv(childEnv) == "fit" {
		fitChild(t)
		return
	}
	env := gputest.Env(gputest.VulkanLibDir(t))
	o := modelgen.Tiny()
	o.Layers, o.Embd, o.FF, o.Heads, o.KVHeads, o.Type = 8, 512, 2048, 8, 8, gguf.F32
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOffloadFitsWhatFits$", "-test.v")
	cmd.Env = append(append(os.Environ(), env...), childEnv+"=fit", "LLOYAL_TEST_MODEL="+testmodel.Path(t, "fit-8x512-v1", o))
	testproc.Tie(cmd)
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP"):
		t.Skipf("the child skipped:\n%s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS"):
		t.Fatalf("the child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func fitChild(t *testing.T) {
	d, ok := OffloadDevice()
	if !ok {
		t.Skip(gputest.NoDeviceMessage)
	}
	path := os.Getenv("LLOYAL_TEST_MODEL")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	fit := &ContextParams{NCtx: 1024, NBatch: 64, NSeqMax: 2}
	load := func(margin uint64) Offload {
		t.Helper()
		fitMargin = margin
		m, err := LoadModel(path, ModelParams{Fit: fit})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		c, err := NewContext(m, *fit)
		if err != nil {
			t.Fatalf("a context beside %v: %v", m.Offload(), err)
		}
		c.Close()
		return m.Offload()
	}
	if off := load(0); off.Layers != off.Of || off.Of != 9 || off.Note != "" {
		t.Errorf("room for everything: %+v", off)
	}
	// Room for about half the weights (8 blocks of 16 MiB and the
	// embeddings) beside the context.
	half := uint64(st.Size()) / 2
	if off := load(d.Free - min(d.Free, half)); off.Layers == 0 || off.Layers >= off.Of || !strings.Contains(off.Note, "fit in "+d.String()) {
		t.Errorf("room for half: %+v", off)
	} else {
		t.Logf("room for half the weights: %s; %s", off, off.Note)
	}
	if off := load(d.Free); off.OnGPU() || !strings.Contains(off.Note, "no layer fits") {
		t.Errorf("no room: %+v", off)
	}
}
