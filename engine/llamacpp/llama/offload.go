package llama

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// GPULayers is how many of a model's layers are stored on a GPU device
// (llama.cpp's n_gpu_layers, ollama's num_gpu). The zero value is
// AllLayers: every layer when a GPU device is found, none on a machine
// without one, as llama.cpp and ollama default.
type GPULayers struct {
	// n is the layer count plus one, so that the zero value is "all".
	n int
}

// AllLayers offloads every layer that fits.
var AllLayers = GPULayers{}

// CPUOnly keeps every layer on the CPU.
var CPUOnly = Layers(0)

// Layers offloads the last n layers (llama.cpp offloads from the output
// end); n < 0 means AllLayers, 0 the CPU, and more than the model has,
// all of them.
func Layers(n int) GPULayers {
	if n < 0 {
		return AllLayers
	}
	return GPULayers{n: n + 1}
}

// Count is the layers asked for; all is true for AllLayers.
func (g GPULayers) Count() (n int, all bool) {
	if g.n == 0 {
		return 0, true
	}
	return g.n - 1, false
}

// Flag is the value as --gpu-layers takes it: -1 for all, else the count.
func (g GPULayers) Flag() int {
	if n, all := g.Count(); !all {
		return n
	}
	return -1
}

// String is the value as --gpu-layers takes it: "-1" for all, else the
// count.
func (g GPULayers) String() string {
	n, all := g.Count()
	if all {
		return "-1"
	}
	return strconv.Itoa(n)
}

// ParseGPULayers reads a --gpu-layers value: a count, "-1" or "all" for
// every layer that fits, 0 for the CPU.
func ParseGPULayers(s string) (GPULayers, error) {
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		return AllLayers, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < -1 {
		return AllLayers, fmt.Errorf("gpu layers %q: use a number of layers, -1 (or all) for every layer that fits on the GPU, or 0 for the CPU, e.g. --gpu-layers 0", s)
	}
	return Layers(n), nil
}

// Offload is where a loaded model's layers are.
type Offload struct {
	// Device is the GPU device holding the offloaded layers ("" when
	// none: everything runs on the CPU).
	Device string
	// Layers of Of are on Device: llama.cpp counts the output layer as
	// one more than the model's blocks.
	Layers, Of int
	// Note says what the user should know: the device could hold only
	// part of the model, a backend library did not load, or a device was
	// asked for and there is none.
	Note string
	// all is set when every layer was asked for (what did not fit is then
	// worth a note; a count the user chose is not).
	all bool
}

// OnGPU reports whether any layer is offloaded.
func (o Offload) OnGPU() bool { return o.Device != "" && o.Layers > 0 }

// String is the offload in a few words, for a header: "CPU", or "Vulkan0
// (…), 13/13 layers".
func (o Offload) String() string {
	if !o.OnGPU() {
		return "CPU"
	}
	return fmt.Sprintf("%s, %d/%d layers", o.Device, o.Layers, o.Of)
}

// fitMargin is the device memory left free when fitting layers (llama.cpp's
// own default, common_params.fit_params_target: 1 GiB): drivers, the
// display and other programs need some. A variable for the test that
// leaves room for part of a model only.
var fitMargin uint64 = 1 << 30

// applyOffload sets mp's device and layer count for a load of path with
// p, fitting AllLayers to the device's free memory beside a context like
// p.Fit (llama_params_fit). It returns what the load will do, and C memory
// that must live until the load is done (free it with C.free).
func applyOffload(path string, p ModelParams, mp *C.struct_llama_model_params) (Offload, []unsafe.Pointer) {
	var notes []string
	for _, b := range loaded {
		if b.Err != nil {
			notes = append(notes, b.Err.Error())
		}
	}
	note := func(o Offload) Offload { o.Note = strings.Join(notes, "; "); return o }
	n, all := p.GPULayers.Count()
	dev, ok := OffloadDevice()
	if p.VocabOnly || (!all && n == 0) {
		// No device at all, not just no layers: with a GPU device in its
		// list llama.cpp would still send a prompt's big matrix products
		// to it (op_offload), and a run asked for on the CPU would not be.
		mp.n_gpu_layers = 0
		none := C.calloc(1, C.size_t(unsafe.Sizeof(dev.dev)))
		mp.devices = (*C.ggml_backend_dev_t)(none)
		return Offload{}, []unsafe.Pointer{none}
	}
	if !ok {
		mp.n_gpu_layers = 0
		if !all {
			notes = append(notes, fmt.Sprintf("--gpu-layers %d asks for a GPU, and there is none (lloyal devices lists what there is; a GPU build is make build GPU=vulkan): running on the CPU", n))
		}
		return note(Offload{}), nil
	}
	// The one device, NULL-terminated, in C memory (llama.cpp keeps no
	// pointer to it past the load).
	devs := (*[2]C.ggml_backend_dev_t)(C.calloc(2, C.size_t(unsafe.Sizeof(dev.dev))))
	devs[0] = dev.dev
	mp.devices = &devs[0]
	mem := []unsafe.Pointer{unsafe.Pointer(devs)}
	mp.n_gpu_layers = 999 // llama.cpp's default: every layer
	if !all {
		mp.n_gpu_layers = C.int32_t(n)
	}
	if all && p.Fit != nil && p.Fit.NCtx > 0 {
		fit := *p.Fit
		fit.NSeqMax = max(fit.NSeqMax, 1)
		cp, _, err := fit.native(false, 0) // fitted to a GPU: the decode's size
		if err == nil {
			split := C.calloc(C.size_t(C.llama_max_devices()), C.size_t(unsafe.Sizeof(C.float(0))))
			overrides := C.calloc(C.size_t(C.llama_max_tensor_buft_overrides()), C.size_t(unsafe.Sizeof(C.struct_llama_model_tensor_buft_override{})))
			mem = append(mem, split, overrides)
			cpath := C.CString(path)
			fitted := C.llama_params_fit(cpath, mp, &cp, (*C.float)(split), (*C.struct_llama_model_tensor_buft_override)(overrides), C.size_t(fitMargin), cp.n_ctx, C.GGML_LOG_LEVEL_ERROR)
			C.free(unsafe.Pointer(cpath))
			if !bool(fitted) {
				notes = append(notes, "fitting the model to "+dev.String()+"'s memory failed ("+takeLog()+"): offloading every layer")
				mp.n_gpu_layers = 999
				mp.tensor_buft_overrides = nil
			}
		}
	}
	if mp.n_gpu_layers == 0 {
		// Nothing fit: the CPU alone, without the device in the list (a
		// model with none of its layers on a listed device gave NaN logits
		// on Mesa's software device, the prompt's products sent to it).
		devs[0] = nil
		mp.tensor_buft_overrides = nil
		notes = append(notes, "no layer fits in "+dev.String()+"'s free memory beside the context: the model runs on the CPU")
		return note(Offload{}), mem
	}
	return note(Offload{Device: dev.String(), Layers: int(mp.n_gpu_layers), all: all}), mem
}

// finishOffload completes o once the model is loaded with nLayer blocks:
// the layers actually offloaded (llama.cpp takes at most every block and
// the output layer), and a note when only part of the model fit.
func finishOffload(o Offload, nLayer int) Offload {
	if o.Device == "" {
		return o
	}
	o.Of = nLayer + 1
	o.Layers = min(o.Layers, o.Of)
	if o.all && o.Layers < o.Of {
		part := fmt.Sprintf("only %d of the model's %d layers fit in %s's free memory beside the context: the rest run on the CPU (a smaller --ctx or --kv-type q8_0 leaves room for more)", o.Layers, o.Of, o.Device)
		o.Note = strings.TrimPrefix(o.Note+"; "+part, "; ")
	}
	return o
}
