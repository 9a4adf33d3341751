package bench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
)

// KVOptions are `lloyal bench kv`'s flags.
type KVOptions struct {
	Model   string // GGUF file (default: the generated ~0.5B model)
	Agents  int    // agents decoding together
	Steps   int    // decode steps measured per row
	Threads int    // fixed CPU threads (0: the fastest per decode)
	Spines  []int  // shared prefix lengths in tokens, one set of rows each
}

// KV measures, for each KV cache type and flash attention setting, the
// bytes one cell costs across the model's layers, the cells a GiB holds,
// and the decode speed of o.Agents branches stepping together after a
// shared prefix of each length in o.Spines. A setting llama.cpp refuses is
// a row that says why.
func KV(w io.Writer, o KVOptions) error {
	if o.Agents < 1 || o.Agents > MaxAgents || o.Steps < 1 || o.Threads < 0 {
		return fmt.Errorf("--agents %d --steps %d --threads %d: agents 1..%d, steps at least 1, threads 0 (default) or more", o.Agents, o.Steps, o.Threads, MaxAgents)
	}
	if err := checkCounts("--spine", o.Spines, 1, 1<<16); err != nil {
		return err
	}
	m, err := openModel(o.Model, "bench", modelgen.Bench())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "kv: %s (%.0fM params), %d agents, %d steps per row\n", m.Info.Name, float64(m.Info.NParams)/1e6, o.Agents, o.Steps)
	limit, err := measureLimit(m.Model, o.Agents, o.Threads)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, limit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "spine\tkv type\tflash attention\tbytes per cell\tcells per GiB\ttokens/s (all agents)\tms per step\t× the limit\t")
	for _, spine := range o.Spines {
		for _, t := range llama.KVTypes {
			for _, fl := range []llama.Flash{llama.FlashOff, llama.FlashOn} {
				if fl == llama.FlashOff && t != llama.KVF16 {
					continue // quantized V is read only by the flash attention kernel
				}
				per := llama.KVBytesPerCell(m.Model, t)
				cp := llama.ContextParams{NThreads: o.Threads, AdaptThreads: o.Threads == 0, KVType: t, FlashAttn: fl}
				row := fmt.Sprintf("%d\t%s\t%s\t%.0f\t%.0f", spine, t, onOff(fl == llama.FlashOn), per, float64(1<<30)/per)
				tps, step, err := kv.MeasureDecode(m.Model, o.Agents, o.Steps, spine, cp)
				if err != nil {
					fmt.Fprintf(tw, "%s\t%s\t\t\t\n", row, "fails: "+err.Error())
					continue
				}
				fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t\n", row, tps, ms(step), float64(step)/float64(limit.step()))
			}
		}
	}
	return tw.Flush()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
