package llamabackend

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
)

// GPULayers is how many of a model's layers go to the GPU device
// (--gpu-layers): the zero value is every layer that fits when a GPU
// device is found, none on a machine without one.
type GPULayers = llama.GPULayers

// CPUOnly keeps every layer on the CPU (--gpu-layers 0).
var CPUOnly = llama.CPUOnly

// Layers offloads the last n layers; n < 0 is every layer that fits, 0 the
// CPU.
func Layers(n int) GPULayers { return llama.Layers(n) }

// ParseGPULayers reads a --gpu-layers value (a count, -1 or all, 0 for the
// CPU), naming the values that work when it is none of them.
func ParseGPULayers(s string) (GPULayers, error) { return llama.ParseGPULayers(s) }

// GPULayersFlag is a flag.Func that parses --gpu-layers into *g.
func GPULayersFlag(g *GPULayers) func(string) error {
	return func(s string) (err error) {
		*g, err = llama.ParseGPULayers(s)
		return err
	}
}

// Offload is where a model's layers are (llama.Offload).
type Offload = llama.Offload

// Device is a compute device (llama.Device).
type Device = llama.Device

// Devices lists every compute device ggml can run on, the CPU first, with
// its memory now; GPU devices come from the backend libraries installed
// beside the binary (Backends).
func Devices() []Device { return llama.Devices() }

// Backends lists the GPU backend libraries found beside the binary (or in
// $LLOYAL_LIBRARY_PATH), loaded or with the reason they did not load.
func Backends() []llama.BackendLib { return llama.Backends() }

// LibraryDirs are the folders GPU backend libraries are loaded from.
func LibraryDirs() []string { return llama.LibraryDirs() }

// BackendsSummary names the backends this binary runs on, for --version:
// "CPU (compiled in); Vulkan (/…/lib/lloyal/libggml-vulkan.so)", with why
// a library found did not load.
func BackendsSummary() string {
	parts := []string{"CPU (compiled in)"}
	for _, b := range Backends() {
		if b.Err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", b.Name, b.Err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", b.Name, b.Path))
	}
	return strings.Join(parts, "; ")
}

// NoDeviceHint says why a machine shows no GPU device, or "" when it has
// one: no backend library installed, one that did not load, or a Vulkan
// backend that found only the software device, which ggml hides unless
// asked for.
func NoDeviceHint() string {
	if _, ok := llama.OffloadDevice(); ok {
		return ""
	}
	libs := Backends()
	if len(libs) == 0 {
		return fmt.Sprintf("no GPU backend is installed (looked in %s): make build GPU=vulkan (or GPU=cuda) builds one", strings.Join(LibraryDirs(), ", "))
	}
	var why []string
	for _, b := range libs {
		switch {
		case b.Err != nil:
			why = append(why, b.Err.Error())
		case b.Name == "Vulkan":
			why = append(why, "the Vulkan backend found no GPU (the software device, Mesa's llvmpipe, is hidden unless GGML_VK_VISIBLE_DEVICES names it, e.g. GGML_VK_VISIBLE_DEVICES=0; vulkaninfo --summary lists the devices)")
		default:
			why = append(why, "the "+b.Name+" backend found no GPU")
		}
	}
	return strings.Join(why, "; ")
}

// Offload is where the backend's model runs: which GPU device holds how
// many of its layers, or the CPU.
func (l *Backend) Offload() Offload { return l.m.Offload() }

// WriteDevices writes `lloyal devices`: every compute device with its
// memory, the GPU backend libraries found, and where a run's layers go by
// default (or why there is no GPU device to put them on).
func WriteDevices(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tTYPE\tBACKEND\tFREE\tTOTAL\tDESCRIPTION")
	for _, d := range Devices() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.Type, d.Backend, gib(d.Free), gib(d.Total), d.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range Backends() {
		if b.Err != nil {
			fmt.Fprintf(w, "GPU backend %s: %v\n", b.Name, b.Err)
			continue
		}
		fmt.Fprintf(w, "GPU backend %s: %s\n", b.Name, b.Path)
	}
	if d, ok := llama.OffloadDevice(); ok {
		fmt.Fprintf(w, "lloyal run offloads every layer that fits to %s (--gpu-layers 0 keeps the model on the CPU)\n", d)
		return nil
	}
	_, err := fmt.Fprintf(w, "no GPU device, the model runs on the CPU: %s\n", NoDeviceHint())
	return err
}

// gib is bytes in GiB with one decimal ("-" when unknown).
func gib(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// DeviceMemory is the free and total memory now of the GPU device holding
// the model's layers and their KV cache, for a gauge beside the cells; ok
// is false when the model runs on the CPU.
func (l *Backend) DeviceMemory() (free, total uint64, ok bool) {
	off := l.Offload()
	if !off.OnGPU() {
		return 0, 0, false
	}
	for _, d := range Devices() {
		if d.String() == off.Device {
			return d.Free, d.Total, true
		}
	}
	return 0, 0, false
}
