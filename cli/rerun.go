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
)

func newRerunCmd() *cobra.Command {
	var out string
	var headless, jsonl, live bool
	cmd := &cobra.Command{
		Use:   "rerun TRACE",
		Short: "Run a recorded run again on the same model, token for token",
		Long: `Runs the run a trace recorded again, as its command line said, on the same
model file (its sha256 is checked against the trace's). Tools are not
called again: each call gets the result the recorded run's agent read
(tools that started agents run, and their agents are rerun too); sampling
uses the recorded seeds. On the same build and model every agent samples
the recorded tokens: rerun says so at the end. Where a token differs
(another build, another thread count that changes float sums), the rerun
stops there and says which agent, where, and both tokens with their
probabilities. --live-tools calls the tools for real.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRerun(cmd, args[0], out, headless, jsonl, live)
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "trace", "", "write the rerun's trace here (default: a new file under the state dir)")
	f.BoolVar(&headless, "headless", false, "print a readable log instead of the terminal app")
	f.BoolVar(&jsonl, "jsonl", false, "stream every event as a JSON line")
	f.BoolVar(&live, "live-tools", false, "call the tools for real instead of serving their recorded results")
	return cmd
}

func runRerun(cmd *cobra.Command, path, out string, headless, jsonl, live bool) error {
	rec, err := rerun.Load(path)
	if err != nil {
		return err
	}
	if err := rec.CheckModel(); err != nil {
		return err
	}
	args, err := rec.RunArgs()
	if err != nil {
		return err
	}
	if out == "" {
		dir, err := trace.DefaultDir()
		if err != nil {
			return err
		}
		out = trace.NewPath(dir)
	}
	// The recorded command line's relative paths (a harness file, a
	// corpus) are relative to where it ran.
	if path, err = filepath.Abs(path); err == nil {
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
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s was recorded by lloyal %s and this is %s: tokens may differ (the rerun stops where they do)\n", path, rec.Header.ProgramVersion, Version)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	rec.LiveTools = live
	rec.OnDiverge = func(engine.Divergence) { cancel() }
	o := &runFlags{argv: rec.Header.CommandLine}
	o.cfg.App.Replay = rec
	o.cfg.App.Header.RerunOf = path
	args = append(args, "--trace", out)
	switch {
	case jsonl:
		args = append(args, "--jsonl")
	case headless:
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
