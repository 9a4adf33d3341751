// Package cli holds lloyal's command line: one cobra command per subcommand.
package cli

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/internal/termtext"
	"github.com/spf13/cobra"
)

// Set at link time by the Makefile (-ldflags -X).
var (
	// Version is the program version.
	Version = "dev"
	// SIMDFlags are the CPU flags llama.cpp was compiled with.
	SIMDFlags = "unknown (built without the Makefile)"
)

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)
	// Every command's text reaches the terminal through Escape's rule: a
	// string from a file, a model or a trace cannot drive the terminal,
	// whichever code printed it. (The app draws on os.Stdout itself.)
	out, errOut := termtext.NewWriter(os.Stdout), termtext.NewWriter(os.Stderr)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	out.Flush()
	errOut.Flush()
	// A run that was stopped exits as a shell reports the signal.
	if code := app.ExitCode(err); code != 1 {
		return code
	}
	// An error may quote a model's text: escaped, it cannot drive the terminal.
	fmt.Fprintln(os.Stderr, "lloyal:", termtext.Escape(err.Error()))
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "lloyal",
		Short:         "Run many LLM agents on one local llama.cpp model, and watch them live",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.AddCommand(newModelCmd(), newBenchCmd(), newGrantsCmd(), newTraceCmd(), newReplayCmd(), newRunCmd(new(runFlags)), newRerunCmd(), newForkCmd(), newAbilityCmd(), newHarnessCmd())
	addDevicesCmd(root)
	return root
}

func versionString() string {
	v := Version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("%s (%s, llama.cpp SIMD: %s)", v, runtime.Version(), SIMDFlags)
}
