// Package offloadtest runs lloyal's backend with every layer offloaded to a
// Vulkan device and checks it against the CPU: on machines without a GPU,
// Mesa's software device (lavapipe), so the GPU code path is tested
// everywhere. ggml loads its backends once per process, so these tests
// live in a package of their own whose TestMain points lloyal at the
// Vulkan backend (package gputest builds it) before anything loads.
package offloadtest

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/llamabackend"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/model"
	"github.com/lloyal-ai/lloyal/internal/gputest"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
)

// skip is why these tests cannot run here ("" when they can).
var skip string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, why, err := gputest.Find()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case why != "":
		skip = why
	default:
		for _, kv := range gputest.Env(dir) {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	}
	os.Exit(m.Run())
}

// device is the Vulkan device the tests offload to, or skips.
func device(t *testing.T) llama.Device {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	d, ok := llama.OffloadDevice()
	if !ok {
		t.Skip(gputest.NoDeviceMessage + " (" + llamabackend.NoDeviceHint() + ")")
	}
	return d
}

func TestDevicesListTheVulkanDevice(t *testing.T) {
	d := device(t)
	if d.Backend != "Vulkan" || !strings.HasPrefix(d.Name, "Vulkan") || d.Total == 0 {
		t.Fatalf("offload device %+v: want a Vulkan device with its memory", d)
	}
	var out strings.Builder
	if err := llamabackend.WriteDevices(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CPU", d.Name, d.Description, "GPU backend Vulkan:", "lloyal run offloads every layer that fits to " + d.Name} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lloyal devices does not say %q:\n%s", want, out.String())
		}
	}
	if s := llamabackend.BackendsSummary(); !strings.Contains(s, "CPU (compiled in)") || !strings.Contains(s, "Vulkan (") {
		t.Errorf("--version backends: %q", s)
	}
	t.Logf("lloyal devices:\n%s", out.String())
}

// openTiny opens the tiny model with g layers offloaded and a context as o
// says.
func openTiny(t *testing.T, g llama.GPULayers, o llamabackend.ContextOptions) *llamabackend.Backend {
	t.Helper()
	m, err := model.Open(testmodel.Tiny(t), model.Options{GPULayers: g})
	if err != nil {
		t.Fatal(err)
	}
	be, err := llamabackend.New(m, o)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(); m.Close() })
	return be
}

// script is what a run does with the cache: a spine prefilled, forks of it
// (shared cells in the unified cache, copies with streams), each with a
// task of its own, then every branch decoding greedily in one batch per
// step. It returns each branch's tokens and the largest difference seen
// between a logit and want's (nil want: none compared).
func script(t *testing.T, be *llamabackend.Backend, want [][]float32) (toks [][]engine.Token, rows [][]float32) {
	t.Helper()
	spine, err := be.Create()
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]engine.Token, 48)
	for i := range prompt {
		prompt[i] = engine.Token(300 + 7*i%200)
	}
	if err := be.Prefill([]engine.Span{{Branch: spine, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	branches := []engine.BranchID{spine}
	for k := range 3 {
		b, err := be.Fork(spine)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Prefill([]engine.Span{{Branch: b, Tokens: []engine.Token{engine.Token(400 + 11*k), engine.Token(450 + k)}}}); err != nil {
			t.Fatal(err)
		}
		branches = append(branches, b)
	}
	for _, b := range branches {
		if err := be.SetSampling(b, engine.Sampling{Temperature: 0}); err != nil {
			t.Fatal(err)
		}
	}
	toks = make([][]engine.Token, len(branches))
	for range 24 {
		steps := make([]engine.Step, len(branches))
		for i, b := range branches {
			row := slices.Clone(be.Logits(b))
			if i := slices.IndexFunc(row, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }); i >= 0 {
				t.Fatalf("branch %d: logit %d is %v", b, i, row[i])
			}
			rows = append(rows, row)
			tok, err := be.Sample(b)
			if err != nil {
				t.Fatal(err)
			}
			toks[i] = append(toks[i], tok)
			steps[i] = engine.Step{Branch: b, Token: tok}
		}
		if err := be.DecodeEach(steps); err != nil {
			t.Fatal(err)
		}
	}
	return toks, rows
}

// maxDiff is the largest difference between two runs' logits, and the
// smallest gap between a row's best and second-best logit of a (how near
// a greedy choice came to flipping).
func maxDiff(a, b [][]float32) (diff, gap float64) {
	gap = math.Inf(1)
	for i := range min(len(a), len(b)) {
		best, second := math.Inf(-1), math.Inf(-1)
		for j := range min(len(a[i]), len(b[i])) {
			diff = max(diff, math.Abs(float64(a[i][j]-b[i][j])))
			switch v := float64(a[i][j]); {
			case v > best:
				best, second = v, best
			case v > second:
				second = v
			}
		}
		gap = min(gap, best-second)
	}
	return diff, gap
}

// With every layer and the KV cache on the Vulkan device, the spine, its
// forks and their batched greedy decodes give the CPU's tokens, in one
// shared cache and with a stream per branch (where a fork copies the
// spine's cells on the device).
func TestOffloadedBranchesMatchTheCPU(t *testing.T) {
	d := device(t)
	for _, streams := range []bool{false, true} {
		t.Run(fmt.Sprintf("streams=%v", streams), func(t *testing.T) {
			o := llamabackend.ContextOptions{NCtx: 2048, NBatch: 128, NSeqMax: 8, NThreads: 1, Streams: streams}
			cpu := openTiny(t, llama.CPUOnly, o)
			gpu := openTiny(t, llama.AllLayers, o)
			if off := cpu.Offload(); off.OnGPU() {
				t.Fatalf("--gpu-layers 0 offloaded: %v", off)
			}
			off := gpu.Offload()
			if !off.OnGPU() || off.Device != d.String() || off.Layers != off.Of || off.Note != "" {
				t.Fatalf("every layer asked for: %+v, want all of them on %s", off, d)
			}
			want, wantRows := script(t, cpu, nil)
			got, gotRows := script(t, gpu, nil)
			diff, gap := maxDiff(wantRows, gotRows)
			t.Logf("%s: largest logit difference from the CPU %.2g (smallest greedy margin %.2g)", d, diff, gap)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("branch %d offloaded sampled %v, on the CPU %v", i, got[i], want[i])
				}
			}
		})
	}
}

// Part of the model on the device (--gpu-layers 2 of the tiny model's
// three) runs too, the rest of the layers on the CPU, with the CPU's
// tokens.
func TestPartialOffloadMatchesTheCPU(t *testing.T) {
	device(t)
	o := llamabackend.ContextOptions{NCtx: 1024, NBatch: 64, NSeqMax: 4, NThreads: 1}
	cpu := openTiny(t, llama.CPUOnly, o)
	gpu := openTiny(t, llama.Layers(2), o)
	if off := gpu.Offload(); off.Layers != 2 || off.Of <= 2 || off.Note != "" {
		t.Fatalf("--gpu-layers 2: %+v", off)
	}
	want, _ := script(t, cpu, nil)
	got, _ := script(t, gpu, nil)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("branch %d partly offloaded sampled %v, on the CPU %v", i, got[i], want[i])
		}
	}
}

// OpenContext fits the model to the device beside the context it opens;
// on a device with room for it, every layer.
func TestOpenContextOffloadsEveryLayerThatFits(t *testing.T) {
	d := device(t)
	be, closeAll, err := llamabackend.OpenContext(testmodel.Tiny(t), llamabackend.ContextOptions{NCtx: 4096, NSeqMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if off := be.Offload(); off.Device != d.String() || off.Layers != off.Of || off.Note != "" {
		t.Fatalf("%+v, want every layer on %s", off, d)
	}
	// The gauge beside the cells: the device's memory.
	if free, total, ok := be.DeviceMemory(); !ok || total == 0 || free > total {
		t.Errorf("device memory %d free of %d (ok %v)", free, total, ok)
	}
}

// The same prompt prefilled again on the device gives the same logits, bit
// for bit: what a rerun on the same device relies on. 48 tokens take the
// Vulkan backend's medium matrix-product shaders (more than 32 rows), the
// ones Mesa 22.3's multithreaded lavapipe computed differently run to run
// (gputest.Env runs it on one thread).
func TestOffloadedPrefillIsDeterministic(t *testing.T) {
	device(t)
	be := openTiny(t, llama.AllLayers, llamabackend.ContextOptions{NCtx: 2048, NBatch: 128, NSeqMax: 8, NThreads: 1})
	prompt := make([]engine.Token, 48)
	for i := range prompt {
		prompt[i] = engine.Token(300 + 7*i%200)
	}
	var first []float32
	for i := range 8 {
		b, err := be.Create()
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Prefill([]engine.Span{{Branch: b, Tokens: prompt}}); err != nil {
			t.Fatal(err)
		}
		row := slices.Clone(be.Logits(b))
		if err := be.Prune(b); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = row
			continue
		}
		if d, _ := maxDiff([][]float32{first}, [][]float32{row}); d != 0 {
			t.Fatalf("prefill %d: logits differ from the first by up to %.3g", i, d)
		}
	}
}
