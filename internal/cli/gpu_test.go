package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/gputest"
	"github.com/lloyal-ai/lloyal/internal/testmodel"
	"github.com/lloyal-ai/lloyal/trace"
)

// The binary with ggml's Vulkan backend beside it: the tests build the
// backend (package gputest: once per machine, cached) and point lloyal at
// it and at Mesa's software Vulkan device with the environment, so the
// offloaded path runs on machines without a GPU. They skip, saying why,
// where the backend cannot be built or no Vulkan device exists.

// vulkanEnv is the environment that makes bin load the Vulkan backend and
// see a device, or skips the test.
func vulkanEnv(t *testing.T, bin string) []string {
	t.Helper()
	env := gputest.Env(gputest.VulkanLibDir(t))
	cmd := exec.Command(bin, "devices")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lloyal devices: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "lloyal run offloads every layer that fits to Vulkan") {
		t.Skipf("%s; lloyal devices says:\n%s", gputest.NoDeviceMessage, out)
	}
	return env
}

// gpuCmd is lloyalCmd with the Vulkan environment, or with none of it
// (cpu: LLOYAL_LIBRARY_PATH set and empty loads no GPU backend).
func gpuCmd(bin, dir, cache string, env []string, args ...string) *exec.Cmd {
	cmd := lloyalCmd(bin, dir, cache, args...)
	if env == nil {
		env = []string{"LLOYAL_LIBRARY_PATH="}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// `lloyal devices` lists the Vulkan device with its memory and says a run
// offloads to it; --version names the backend.
func TestDevicesListTheVulkanDevice(t *testing.T) {
	bin := lloyalBinary(t)
	env := vulkanEnv(t, bin)
	dir := t.TempDir()
	out, err := gpuCmd(bin, dir, filepath.Join(dir, "cache"), env, "devices").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"DEVICE", "CPU", "Vulkan0", "GiB", "GPU backend Vulkan: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("lloyal devices does not say %q:\n%s", want, out)
		}
	}
	// The backend's own log (its devices, at load) is captured, not
	// printed over the app.
	if strings.Contains(string(out), "ggml_vulkan") {
		t.Errorf("the Vulkan backend's log reached the terminal:\n%s", out)
	}
	t.Logf("lloyal devices:\n%s", out)
	out, err = gpuCmd(bin, dir, filepath.Join(dir, "cache"), env, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "backends: CPU (compiled in); Vulkan (") {
		t.Errorf("lloyal --version: %v\n%s", err, out)
	}
	// Without the backend: the CPU only, and why.
	out, err = gpuCmd(bin, dir, filepath.Join(dir, "cache"), nil, "devices").CombinedOutput()
	if err != nil || strings.Contains(string(out), "Vulkan0") || !strings.Contains(string(out), "no GPU device, the model runs on the CPU: no GPU backend is installed") {
		t.Errorf("lloyal devices without a backend: %v\n%s", err, out)
	}
}

// headerContext is a trace's header's context.
func headerContext(t *testing.T, path string) trace.ContextInfo {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var h trace.Header
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatal(err)
	}
	return h.Context
}

// turns is every agent:turn of a trace in order: agent, text and token ids.
func turns(t *testing.T, path string) []event.Event {
	t.Helper()
	var out []event.Event
	if _, _, err := trace.Follow(t.Context(), path, false, func(e event.Event) error {
		if e.Type == event.AgentTurn {
			out = append(out, event.Event{Agent: e.Agent, Text: e.Text, IDs: e.IDs})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A run with every layer on the Vulkan device writes the CPU run's turns,
// token for token: the default research run on the demo model, and the
// tiny model walked through the tools with a stream per agent (forks copy
// the spine's cells on the device). Its header names the device, and a
// rerun of the tiny run on the same device is token for token.
func TestOffloadedRunsMatchTheCPU(t *testing.T) {
	bin := lloyalBinary(t)
	env := vulkanEnv(t, bin)
	for _, c := range []struct {
		name  string
		args  []string
		rerun bool
	}{
		// The research run is the slow one (about 5 minutes offloaded to
		// the software device on 2 cores): the rerun is the tiny run's.
		{"research", []string{"run", "--headless", "--deny-protected"}, false},
		{"tiny-streams", []string{"run", "--headless", "--deny-protected", "--model", testmodel.Tiny(t), "--walk", "--ctx", "16384", "--streams", "4",
			"--temperature", "0", "--threads", "1"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cache := filepath.Join(dir, "cache")
			traces := map[string]string{}
			for _, on := range []string{"cpu", "gpu"} {
				traces[on] = filepath.Join(dir, on+".jsonl")
				e := env
				args := append(slices.Clone(c.args), "--trace", traces[on])
				if on == "cpu" {
					e, args = nil, append(args, "--gpu-layers", "0")
				}
				if out, err := gpuCmd(bin, dir, cache, e, args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "trace: ") {
					t.Fatalf("%s run: %v\n%s", on, err, out)
				}
			}
			if ctx := headerContext(t, traces["cpu"]); ctx.Device != "" || ctx.GPULayers != 0 {
				t.Errorf("the CPU run's header: device %q, %d layers", ctx.Device, ctx.GPULayers)
			}
			ctx := headerContext(t, traces["gpu"])
			if !strings.HasPrefix(ctx.Device, "Vulkan0") || ctx.GPULayers == 0 || ctx.GPULayers != ctx.Layers {
				t.Fatalf("the offloaded run's header: device %q, %d of %d layers", ctx.Device, ctx.GPULayers, ctx.Layers)
			}
			// Each agent's turns, token for token. (Agents whose turns end
			// at once may be recorded in another order: tools run beside
			// the decodes.)
			want, got := turns(t, traces["cpu"]), turns(t, traces["gpu"])
			for a, ids := range agentTurns(want) {
				if g := agentTurns(got)[a]; !slices.Equal(g, ids) {
					t.Fatalf("agent %d offloaded wrote %d tokens, on the CPU %d: first ids %v vs %v", a, len(g), len(ids), head(g), head(ids))
				}
			}
			if len(got) != len(want) || len(got) < 3 || len(agentTurns(got)) != len(agentTurns(want)) {
				t.Fatalf("%d turns offloaded, %d on the CPU", len(got), len(want))
			}
			t.Logf("%d turns of %d agents, token for token, on %s", len(got), len(agentTurns(got)), ctx.Device)
			if !c.rerun {
				return
			}

			// The rerun, on the same device.
			again := filepath.Join(dir, "rerun.jsonl")
			out, err := gpuCmd(bin, t.TempDir(), cache, env, "rerun", traces["gpu"], "--headless", "--deny-protected", "--trace", again).CombinedOutput()
			if err != nil {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			ran, reran := sampledIDsOf(t, traces["gpu"]), sampledIDsOf(t, again)
			n := 0
			for a, ids := range ran {
				if !slices.Equal(reran[a], ids) {
					t.Fatalf("agent %d: the rerun sampled %v…, the run %v…", a, head(reran[a]), head(ids))
				}
				n += len(ids)
			}
			if !strings.Contains(string(out), fmt.Sprintf("%d sampled tokens", n)) {
				t.Fatalf("the rerun did not say it matched %d tokens:\n%s", n, out)
			}
		})
	}
}

// agentTurns is each agent's turns' token ids, in order.
func agentTurns(ts []event.Event) map[int][]int32 {
	out := map[int][]int32{}
	for _, e := range ts {
		out[e.Agent] = append(out[e.Agent], e.IDs...)
	}
	return out
}

// sampledIDsOf is sampledIDs without the tool count.
func sampledIDsOf(t *testing.T, path string) map[int][]int32 {
	ids, _ := sampledIDs(t, path)
	return ids
}

// --gpu-layers reaches the backend: 0 keeps the model off the device that
// is there, 1 puts one layer on it, and the header says so. (The run is
// stopped once its header is written: the rest is the other tests'.)
func TestGPULayersFlagReachesTheBackend(t *testing.T) {
	bin := lloyalBinary(t)
	env := vulkanEnv(t, bin)
	dir := t.TempDir()
	for _, c := range []struct {
		flag   string
		layers int
	}{{"0", 0}, {"1", 1}} {
		rec := filepath.Join(dir, "layers-"+c.flag+".jsonl")
		cmd := gpuCmd(bin, dir, filepath.Join(dir, "cache"), env, "run", "--headless", "--deny-protected", "--model", testmodel.Tiny(t), "--walk",
			"--ctx", "4096", "--agents", "1", "--temperature", "0", "--threads", "1", "--gpu-layers", c.flag, "--trace", rec)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if b, err := os.ReadFile(rec); err == nil && strings.Contains(string(b), "\n") {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("--gpu-layers %s: no trace header after 2 minutes\n%s", c.flag, out.String())
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if ctx := headerContext(t, rec); ctx.GPULayers != c.layers || (c.layers == 0) != (ctx.Device == "") {
			t.Errorf("--gpu-layers %s: the header says %d layers on %q (the flag must reach backends.Config through the run's facts: trace.RunConfig and runconfig.Decide)", c.flag, ctx.GPULayers, ctx.Device)
		}
	}
}
