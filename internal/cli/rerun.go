package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/internal/rerun"
	"github.com/lloyal-ai/lloyal/internal/runconfig"
	"github.com/lloyal-ai/lloyal/internal/session"
	"github.com/lloyal-ai/lloyal/internal/ui"
	"github.com/lloyal-ai/lloyal/trace"
)

// rerunFlags are what rerun and fork share: where the new trace goes, how
// the run is shown, and the authority the run has. A trace carries none:
// grants and the workspace come from these flags alone.
type rerunFlags struct {
	out             string
	headless, jsonl bool
	approvals       approvals.Config
	workspace       string
	corpus          string
	harness         string
}

func (f *rerunFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.out, "trace", "", "write the new run's trace here (default: a new file under the state dir)")
	fs.BoolVar(&f.headless, "headless", false, "print a readable log instead of the terminal app")
	fs.BoolVar(&f.jsonl, "jsonl", false, "stream every event as a JSON line")
	fs.StringVar(&f.workspace, "workspace", "", "folder write_note saves notes in (default ./lloyal-notes: never the recorded run's)")
	fs.StringVar(&f.corpus, "corpus", "", "folder the search reads, for a run that searched one (never taken from the trace)")
	fs.StringVar(&f.harness, "harness", "", "the harness file to run, for a run of one (never taken from the trace; its sha256 is checked)")
	approvalFlags(fs, &f.approvals)
}

func newRerunCmd() *cobra.Command {
	var f rerunFlags
	var live bool
	cmd := &cobra.Command{
		Use:   "rerun TRACE",
		Short: "Run a recorded run again on the same model, token for token",
		Long: `Runs a trace's run again on the same model file (sha256 checked): calls
get the results the recorded agents read, prefills repeat at the recorded
ticks, sampling uses the recorded seeds. It says "token for token" at the
end, or stops at the first token that differs (agent, turn, place, both
tokens' probabilities). --live-tools calls the tools for real.

A trace says what ran, never with what authority: grants, the notes
folder, the folder searched and the harness file run come from this
command's flags (--grant, --deny-protected, --workspace, --corpus,
--harness: its sha256 must be the recorded one), abilities from those you have
enabled, and it says first what the recorded run had that this one
does not. Headless, a run that granted tools needs --grant or
--deny-protected. docs/time-travel.md says more.`,
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
		Long: `Runs a trace's run again, its past written from the recorded tokens, up
to EVENT (an agent:spawn, a tool:result, a denied call's agent:nudge).
There the agent reads --replace-result FILE's contents, or what it read
with --append TEXT after it, and runs on live, with every agent it starts;
other agents stay as recorded until what they read differs.
docs/time-travel.md says more.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("at") {
				return errors.New("--at EVENT: the id of the event to fork at (lloyal replay's dev pane and --jsonl show ids)")
			}
			rec, err := rerun.Load(args[0])
			if err == nil {
				err = rec.ForkWith(at, replace, appendText)
			}
			if err != nil {
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

// reexecute runs rec's run again with rec as its replay: a rerun, or with
// fork set a fork (its header names it). The run is decided as lloyal run
// decides one, from the recorded facts and this command's authority.
func (f *rerunFlags) reexecute(cmd *cobra.Command, rec *rerun.Record, fork *trace.ForkRef) error {
	// The command's own grants, workspace and approvals, never the trace's.
	a := rerun.Authority{Approvals: f.approvals, Workspace: f.workspace, Corpus: f.corpus, Harness: f.harness, Headless: f.headless || f.jsonl}
	plan, err := rec.Prepare(f.out, Version, a, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	rec.OnDiverge = func(engine.Divergence) { cancel() }
	base, _ := baseConfig(cmd, f.headless, f.jsonl, "dark")
	base.App.Replay, base.App.TracePath = rec, plan.Out
	// The record's tokens were decoded with or without jump-forward (runs
	// before it have none); the rerun must split text into tokens alike.
	jf := rec.Header.Sampling.JumpForward
	base.Sampling.JumpForward = &jf
	if h := rec.Header.Harness; h != nil {
		base.HarnessSHA256 = h.SHA256
	}
	base.Attachments, base.Recorded = plan.Attachments, true
	if fork != nil {
		fork.Trace = plan.Trace
		base.App.Header.ForkOf = fork
	} else {
		base.App.Header.RerunOf = plan.Trace
	}
	auth := runconfig.Authority{Approvals: a.Approvals, Workspace: a.Workspace, Rerun: true}
	cfg, file, err := runconfig.Decide(plan.Facts, auth, base)
	if err == nil {
		err = session.Run(ctx, cfg, file)
	}
	said, err := rec.Verdict(plan, err)
	fmt.Fprint(cmd.OutOrStdout(), said)
	return err
}

// forkFromReplay runs the fork F asked for in lloyal replay, in the app,
// its search reading corpus and its harness file harness (replay's
// --corpus and --harness).
func forkFromReplay(cmd *cobra.Command, path string, r *ui.ForkRequest, corpus, harness string) error {
	rec, err := rerun.Load(path)
	if err == nil {
		err = rec.ForkEdited(r.Event, r.Text)
	}
	if err != nil {
		return err
	}
	f := rerunFlags{corpus: corpus, harness: harness}
	return f.reexecute(cmd, rec, &trace.ForkRef{Event: r.Event})
}
