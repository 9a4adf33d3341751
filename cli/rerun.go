package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/rerun"
	"github.com/lloyal-ai/lloyal/trace"
	"github.com/lloyal-ai/lloyal/ui"
)

// rerunFlags are what rerun and fork share: where the new trace goes and
// how the run is shown.
type rerunFlags struct {
	out             string
	headless, jsonl bool
}

func (f *rerunFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.out, "trace", "", "write the new run's trace here (default: a new file under the state dir)")
	fs.BoolVar(&f.headless, "headless", false, "print a readable log instead of the terminal app")
	fs.BoolVar(&f.jsonl, "jsonl", false, "stream every event as a JSON line")
}

func newRerunCmd() *cobra.Command {
	var f rerunFlags
	var live bool
	cmd := &cobra.Command{
		Use:   "rerun TRACE",
		Short: "Run a recorded run again on the same model, token for token",
		Long: `Runs the run a trace recorded again, as its command line said, on the same
model file (its sha256 is checked against the trace's). Tools are not
called again: each call gets the result the recorded run's agent read
(tools that started agents run, and their agents are rerun too); every
prefill writes what the recorded one wrote, at the same tick; sampling uses
the recorded seeds. On the same build and model every agent samples the
recorded tokens: rerun says so at the end. Where a token differs (another
build, another thread count that changes float sums), the rerun stops
there and says which agent, where, and both tokens with their
probabilities. --live-tools calls the tools for real.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := rerun.Load(args[0])
			if err != nil {
				return err
			}
			rec.LiveTools = live
			return f.reexecute(cmd, rec, nil)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&live, "live-tools", false, "call the tools for real instead of serving their recorded results")
	return cmd
}

func newForkCmd() *cobra.Command {
	var f rerunFlags
	var at uint64
	var replace, appendText string
	cmd := &cobra.Command{
		Use:   "fork TRACE --at EVENT (--replace-result FILE | --append TEXT)",
		Short: "Run a recorded run again up to an agent's turn, then on from an edit of what it read",
		Long: `Runs a recorded run again up to EVENT, writing its past from the
recorded tokens (prefilled a turn at a time) with tools answered from the
record. EVENT is an agent:spawn (the agent's task), a tool:result, or the
agent:nudge of a denied call. There the agent reads the edit instead — --replace-result
FILE's contents (JSON as it is, other text as a JSON string; for a task,
the new task) or what it read with --append TEXT after it — and from
there it, and every agent it starts, runs live on the model with real
tools. The other agents stay as recorded while what they read is what
they read, and run live from the first span that differs (a publisher
reading the forked agent's new findings). The new trace's header names
forkOf: the trace and the event.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (replace == "") == (appendText == "") {
				return errors.New("give exactly one of --replace-result FILE and --append TEXT: what the agent reads at the fork")
			}
			if !cmd.Flags().Changed("at") {
				return errors.New("--at EVENT: the id of the event to fork at (lloyal replay's dev pane and --jsonl show ids)")
			}
			rec, err := rerun.Load(args[0])
			if err != nil {
				return err
			}
			p, err := rec.Point(at)
			if err != nil {
				return err
			}
			edited := p.Appended(appendText)
			if replace != "" {
				b, err := os.ReadFile(replace)
				if err != nil {
					return fmt.Errorf("--replace-result: %w", err)
				}
				edited = p.Replacement(string(b))
			}
			if err := rec.ForkAt(at, edited, rec.Header.Context.NCtx); err != nil {
				return err
			}
			return f.reexecute(cmd, rec, &trace.ForkRef{Event: at})
		},
	}
	f.add(cmd)
	fs := cmd.Flags()
	fs.Uint64Var(&at, "at", 0, "the id of the event to fork at: an agent:spawn, a tool:result or a denied call's agent:nudge")
	fs.StringVar(&replace, "replace-result", "", "the agent reads this file's contents at the fork instead")
	fs.StringVar(&appendText, "append", "", "the agent reads this after what it read at the fork")
	return cmd
}

// reexecute runs rec's command line again with rec as its replay: a rerun,
// or with fork set a fork (its header names it).
func (f *rerunFlags) reexecute(cmd *cobra.Command, rec *rerun.Record, fork *trace.ForkRef) error {
	if err := rec.CheckModel(); err != nil {
		return err
	}
	args, err := rec.RunArgs()
	if err != nil {
		return err
	}
	out := f.out
	if out == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return err
		}
		out = trace.NewPath(dir)
	}
	// The recorded command line's relative paths (a harness file, a
	// corpus) are relative to where it ran.
	path, err := filepath.Abs(rec.Path)
	if err == nil {
		out, err = filepath.Abs(out)
	}
	if err != nil {
		return err
	}
	if d := rec.Header.Dir; d != "" {
		if err := os.Chdir(d); err != nil {
			return fmt.Errorf("the recorded run started in %s, which a rerun needs for its relative paths: %w", d, err)
		}
	}
	if rec.Header.ProgramVersion != Version {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s was recorded by lloyal %s and this is %s: tokens may differ (a rerun stops where they do)\n", path, rec.Header.ProgramVersion, Version)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	rec.OnDiverge = func(engine.Divergence) { cancel() }
	o := &runFlags{argv: rec.Header.CommandLine}
	o.cfg.App.Replay = rec
	if h := rec.Header.Harness; h != nil {
		o.cfg.HarnessSHA256 = h.SHA256
	}
	if fork != nil {
		fork.Trace = path
		o.cfg.App.Header.ForkOf = fork
	} else {
		o.cfg.App.Header.RerunOf = path
	}
	args = append(args, "--trace", out)
	switch {
	case f.jsonl:
		args = append(args, "--jsonl")
	case f.headless:
		args = append(args, "--headless")
	}
	run := newRunCmd(o)
	run.SetArgs(args)
	run.SetOut(cmd.OutOrStdout())
	run.SetErr(cmd.ErrOrStderr())
	run.SilenceUsage, run.SilenceErrors = true, true
	runErr := run.ExecuteContext(ctx)
	if d := rec.Divergence(); d != nil {
		return fmt.Errorf("the rerun diverged from %s: %s; its trace: %s", path, d, out)
	}
	if fork != nil {
		if runErr == nil && !rec.Forked() {
			return fmt.Errorf("the fork never reached event %d of %s (agent %d's %s): the run went on as recorded and nothing was forked; its trace: %s", fork.Event, path, rec.ForkPoint().Agent, rec.ForkPoint().Kind, out)
		}
		if runErr == nil {
			fmt.Fprintf(cmd.OutOrStdout(), "fork: %s, forked from %s at event %d\n", out, path, fork.Event)
		}
		return runErr
	}
	got, err := rerun.Load(out)
	if err != nil {
		return errors.Join(runErr, err)
	}
	// A run that failed is rerun faithfully when it fails the same way.
	if runErr != nil && got.Closing.Reason != rec.Closing.Reason {
		return runErr
	}
	m, err := rerun.Compare(rec, got)
	if err != nil {
		return fmt.Errorf("the rerun differs from the recorded run: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "rerun: token for token the recorded run: %d agents, %d sampled tokens (trace %s)\n", m.Agents, m.Tokens, out)
	if runErr != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "rerun: it ended as the recorded run did: %s\n", rec.Closing.Reason)
	}
	return nil
}

// forkFromReplay runs the fork F asked for in lloyal replay, in the app.
func forkFromReplay(cmd *cobra.Command, path string, r *ui.ForkRequest) error {
	rec, err := rerun.Load(path)
	if err != nil {
		return err
	}
	p, err := rec.Point(r.Event)
	if err != nil {
		return err
	}
	if err := rec.ForkAt(r.Event, p.Replacement(r.Text), rec.Header.Context.NCtx); err != nil {
		return err
	}
	var f rerunFlags
	return f.reexecute(cmd, rec, &trace.ForkRef{Event: r.Event})
}
