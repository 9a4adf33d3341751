package llama

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "ggml-backend.h"
#include "shim.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"
)

// LibraryPathEnv names the folders (a list, like PATH) GPU backend
// libraries are loaded from instead of lib/lloyal beside the binary. Set
// and empty, none is loaded: the run is on the CPU.
const LibraryPathEnv = "LLOYAL_LIBRARY_PATH"

// gpuBackends are the backend libraries lloyal loads, in the order it
// loads them: scripts/build-gpu.sh builds them from the ollama module's
// ggml (CPU is compiled into the binary).
var gpuBackends = []string{"cuda", "vulkan"}

// needs says what a backend library needs on the machine, for the message
// when it does not load.
var needs = map[string]string{
	"cuda":   "it needs NVIDIA's driver and the CUDA runtime it was built with",
	"vulkan": "it needs the Vulkan loader, libvulkan1, and a Vulkan driver: the GPU's own, or Mesa's (mesa-vulkan-drivers)",
}

// BackendLib is a GPU backend library found in a library folder.
type BackendLib struct {
	Name string // ggml's name for it once loaded (Vulkan, CUDA), else the file's
	Path string
	// Err says why it did not load (nil: loaded).
	Err error
}

var loaded []BackendLib

// LibraryDirs are the folders GPU backends are loaded from: $LLOYAL_LIBRARY_PATH
// when set, else lib/lloyal beside the folder of the binary (bin/lloyal →
// lib/lloyal, as `make build GPU=…` installs them).
func LibraryDirs() []string {
	if v, ok := os.LookupEnv(LibraryPathEnv); ok {
		var dirs []string
		for _, d := range filepath.SplitList(v) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
		return dirs
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return []string{filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", "lloyal")}
}

// loadBackends registers every GPU backend library found in LibraryDirs
// with ggml, before llama.cpp is initialised. A library that does not load
// (no Vulkan loader installed, a driver too old) is recorded with the
// reason and the run stays on the CPU: never an abort.
func loadBackends() {
	for _, dir := range LibraryDirs() {
		for _, name := range gpuBackends {
			path := filepath.Join(dir, "libggml-"+name+".so")
			if _, err := os.Stat(path); err != nil {
				continue
			}
			lib := BackendLib{Name: name, Path: path}
			// The backend logs through the ggml-base library beside it, a
			// copy of ggml apart from the one compiled into this binary:
			// loaded first and its log captured like llama.cpp's, the
			// backend's messages (its devices, at load) cannot paint over
			// the app.
			cbase := C.CString(filepath.Join(dir, "libggml-base.so"))
			C.lloyal_log_hook_library(cbase)
			C.free(unsafe.Pointer(cbase))
			takeLog()
			cpath := C.CString(path)
			reg := C.ggml_backend_load(cpath)
			C.free(unsafe.Pointer(cpath))
			if reg == nil {
				lib.Err = fmt.Errorf("%s did not load: %s (%s)", path, cmp.Or(takeLog(), "ggml gave no reason"), needs[name])
			} else {
				lib.Name = C.GoString(C.ggml_backend_reg_name(reg))
			}
			loaded = append(loaded, lib)
		}
	}
}

// Backends lists the GPU backend libraries found, loaded or not (the CPU
// backend is compiled in and not listed).
func Backends() []BackendLib {
	ensureInit()
	return slices.Clone(loaded)
}

// DeviceType is the kind of a compute device.
type DeviceType string

// Device types (ggml_backend_dev_type).
const (
	DeviceCPU   DeviceType = "CPU"
	DeviceGPU   DeviceType = "GPU"
	DeviceIGPU  DeviceType = "iGPU" // a GPU sharing the host's memory
	DeviceAccel DeviceType = "accel"
)

// Device is a compute device ggml can run on.
type Device struct {
	Name        string // Vulkan0, CUDA0, CPU
	Description string // the driver's name for it: "NVIDIA H100", "llvmpipe (LLVM 15.0.6, 256 bits)"
	Type        DeviceType
	Backend     string // the backend that drives it: Vulkan, CUDA, CPU
	// Free and Total are its memory in bytes as its driver reports it
	// (for the CPU, the host's).
	Free, Total uint64
	dev         C.ggml_backend_dev_t
}

// String is the device as a header names it: "Vulkan0 (llvmpipe …)".
func (d Device) String() string {
	if d.Description == "" || d.Description == d.Name {
		return d.Name
	}
	return d.Name + " (" + d.Description + ")"
}

// Offloads reports whether llama.cpp can store layers on the device (a GPU
// or an integrated GPU; the CPU holds what is not offloaded).
func (d Device) Offloads() bool { return d.Type == DeviceGPU || d.Type == DeviceIGPU }

// Devices lists every compute device, the CPU included, with its memory
// now.
func Devices() []Device {
	ensureInit()
	n := int(C.ggml_backend_dev_count())
	out := make([]Device, 0, n)
	for i := range n {
		dev := C.ggml_backend_dev_get(C.size_t(i))
		var free, total C.size_t
		C.ggml_backend_dev_memory(dev, &free, &total)
		d := Device{Name: C.GoString(C.ggml_backend_dev_name(dev)), Description: strings.TrimSpace(C.GoString(C.ggml_backend_dev_description(dev))),
			Backend: C.GoString(C.ggml_backend_reg_name(C.ggml_backend_dev_backend_reg(dev))), Free: uint64(free), Total: uint64(total), dev: dev}
		switch C.ggml_backend_dev_type(dev) {
		case C.GGML_BACKEND_DEVICE_TYPE_CPU:
			d.Type = DeviceCPU
		case C.GGML_BACKEND_DEVICE_TYPE_GPU:
			d.Type = DeviceGPU
		case C.GGML_BACKEND_DEVICE_TYPE_IGPU:
			d.Type = DeviceIGPU
		default:
			d.Type = DeviceAccel
		}
		out = append(out, d)
	}
	return out
}

// OffloadDevice is the device a model's layers go to when offloaded: the
// discrete GPU with the most memory, else the integrated one with the
// most; ok is false when there is none (the CPU runs everything). One
// device, not a split across several, so a run names the one it ran on.
func OffloadDevice() (Device, bool) {
	var best Device
	found := false
	rank := func(d Device) int {
		if d.Type == DeviceGPU {
			return 2
		}
		return 1
	}
	for _, d := range Devices() {
		if !d.Offloads() {
			continue
		}
		if !found || rank(d) > rank(best) || rank(d) == rank(best) && d.Total > best.Total {
			best, found = d, true
		}
	}
	return best, found
}
