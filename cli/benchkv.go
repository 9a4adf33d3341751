package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine/llamacpp/kv"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/llama"
	"github.com/lloyal-ai/lloyal/engine/llamacpp/modelgen"
)

func newBenchKVCmd() *cobra.Command {
	var ref, spines string
	var agents, steps, threads int
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "KV cache types and flash attention: cells per GiB and batched decode speed",
		Long: `For each KV cache type (--kv-type f16, q8_0, q4_0) and flash attention
setting: the bytes one cell costs across the model's layers, the cells a
GiB holds (how many agents' tokens fit), and the decode speed of --agents
branches stepping together after a shared prefix of each --spine length
(every step attends to it: ggml's CPU flash attention walks the cells one
at a time, so its cost grows with the prefix faster than the matrix
products' without it). Quantized caches need flash attention.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents < 1 || agents > llama.MaxSeq-1 || steps < 1 || threads < 0 {
				return fmt.Errorf("--agents %d --steps %d --threads %d: agents 1..%d, steps at least 1, threads 0 (default) or more", agents, steps, threads, llama.MaxSeq-1)
			}
			lens, err := countList("--spine", spines, 1<<16)
			if err != nil {
				return err
			}
			return benchKV(cmd.OutOrStdout(), ref, agents, steps, threads, lens)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ref, "model", "", "GGUF file (default: the generated ~0.5B bench model)")
	f.IntVar(&agents, "agents", 8, "agents decoding together")
	f.IntVar(&steps, "steps", 16, "decode steps measured per row")
	f.IntVar(&threads, "threads", 0, "fix the CPU threads (default: the fastest per decode)")
	f.StringVar(&spines, "spine", "64,1000", "shared prefix lengths in tokens, one set of rows each")
	return cmd
}

func benchKV(w io.Writer, ref string, agents, steps, threads int, spines []int) error {
	m, err := benchModel(ref, "bench", modelgen.Bench())
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "kv: %s (%.0fM params), %d agents, %d steps per row\n", m.Info.Name, float64(m.Info.NParams)/1e6, agents, steps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "spine\tkv type\tflash attention\tbytes per cell\tcells per GiB\ttokens/s (all agents)\tms per step\t")
	for _, spine := range spines {
		for _, t := range llama.KVTypes {
			for _, fl := range []llama.Flash{llama.FlashOff, llama.FlashOn} {
				if fl == llama.FlashOff && t != llama.KVF16 {
					continue // quantized V is read only by the flash attention kernel
				}
				per := llama.KVBytesPerCell(m.Model, t)
				cp := llama.ContextParams{NThreads: threads, AdaptThreads: threads == 0, KVType: t, FlashAttn: fl}
				row := fmt.Sprintf("%d\t%s\t%s\t%.0f\t%.0f", spine, t, onOff(fl == llama.FlashOn), per, float64(1<<30)/per)
				tps, step, err := kv.MeasureDecode(m.Model, agents, steps, spine, cp)
				if err != nil {
					fmt.Fprintf(tw, "%s\t%s\t\t\n", row, "fails: "+err.Error())
					continue
				}
				fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t\n", row, tps, ms(step))
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
