package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/app"
	"github.com/lloyal-ai/lloyal/internal/rerun"
	"github.com/lloyal-ai/lloyal/trace"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Check and summarise trace files"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate every line; report each bad one with its line number and reason",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := trace.CheckFile(args[0])
			if err != nil {
				return err
			}
			return c.Print(cmd.OutOrStdout(), args[0])
		},
	}, &cobra.Command{
		Use:   "stats FILE",
		Short: "Agents, tokens, tool calls by tool, durations, outcomes, pressure peak",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := trace.StatsOf(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return st.Print(cmd.OutOrStdout())
		},
	})
	return cmd
}

func newReplayCmd() *cobra.Command {
	var headless, follow bool
	var speed float64
	var themeName, corpus, harnessFile string
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Play a recorded run back",
		Long: `Plays a trace back as it happened, on the same screen as a live run, with a
transport bar: space play/pause, . step an event, , step a tick, n/a/e jump
to the next tool call / approval / failure, [ ] seek ±10 s, + - speed
(×0.25…×64). --speed sets the starting speed (1 = real time, 0 = at once);
--headless prints the run as text instead (a pause plays for a minute at
most); --follow keeps reading a trace that is still being written until its
run closes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if speed < 0 || speed > 64 || (speed > 0 && speed < 0.25) {
				return fmt.Errorf("--speed %v: use 0 (at once) or a factor from 0.25 to 64", speed)
			}
			if !headless {
				if !app.IsTerminal(os.Stdout) {
					return errors.New("the replay screen needs a terminal: use --headless to print the run as text")
				}
				t, err := app.Theme(themeName)
				if err != nil {
					return err
				}
				refused := func(h *trace.Header) string {
					if err := rerun.ForkFlags(args[0], h, corpus, harnessFile); err != nil {
						return err.Error()
					}
					return ""
				}
				fork, err := app.Replay(args[0], t, speed, follow, refused)
				if err != nil || fork == nil {
					return err
				}
				return forkFromReplay(cmd, args[0], fork, corpus, harnessFile)
			}
			closing, problems, err := trace.Play(cmd.Context(), args[0], speed, follow, cmd.OutOrStdout())
			for _, p := range problems {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", args[0], p)
			}
			if err != nil {
				return err
			}
			if closing != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "— run ended: %s (%d events)\n", closing.Reason, closing.Events)
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "— end of file: "+trace.NoClosing)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&headless, "headless", false, "print the run as text")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep reading a trace that is still being written")
	cmd.Flags().Float64Var(&speed, "speed", 1, "playback speed (0.25…64; 0 = as fast as possible)")
	cmd.Flags().StringVar(&themeName, "theme", "dark", "dark, light or high-contrast (NO_COLOR turns colour off)")
	cmd.Flags().StringVar(&corpus, "corpus", "", "folder a fork (F) of a run that searched one reads (never taken from the trace)")
	cmd.Flags().StringVar(&harnessFile, "harness", "", "the harness file a fork (F) of a run of one runs (never taken from the trace; its sha256 is checked)")
	return cmd
}
