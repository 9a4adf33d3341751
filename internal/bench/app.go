package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// App measures the user's whole path: this binary's default `lloyal run`
// (the research demo, with --grant write_note so nobody has to answer) is
// run three ways and its wall time printed for each: headless on the
// machine as it is; headless while a busy loop holds one core; and in the
// terminal app inside tmux (120×36), timed until the app says the run
// finished (skipped where tmux is not installed). It runs the executable of
// the process that calls it: call it from the lloyal binary.
func App(ctx context.Context, w io.Writer, seed uint32) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary to run: %w", err)
	}
	dir, err := os.MkdirTemp("", "lloyal-bench-app-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := func(name string) []string {
		return []string{"run", "--grant", "write_note", "--seed", fmt.Sprint(seed),
			"--trace", filepath.Join(dir, name+".jsonl"), "--workspace", filepath.Join(dir, name+"-notes"),
			"--grants-file", filepath.Join(dir, "grants.json")}
	}
	headless := func(name string) (time.Duration, error) {
		start := time.Now()
		out, err := runChild(ctx, self, append(args(name), "--headless")...)
		if err != nil {
			return 0, fmt.Errorf("%s run: %v\n%s", name, err, out)
		}
		return time.Since(start), nil
	}
	quiet, err := headless("quiet")
	if err != nil {
		return err
	}
	stop, err := holdACore(ctx)
	if err != nil {
		return err
	}
	busy, err := headless("busy")
	stop()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\twall s\tvs headless\t")
	fmt.Fprintf(tw, "headless\t%.2f\t1.00×\t\n", quiet.Seconds())
	fmt.Fprintf(tw, "headless, one core busy\t%.2f\t%.2f×\t\n", busy.Seconds(), float64(busy)/float64(quiet))
	if _, err := exec.LookPath("tmux"); err != nil {
		fmt.Fprintln(tw, "in the app\t—\tskipped: tmux is not installed\t")
		return tw.Flush()
	}
	app, err := inTmux(ctx, self, args("app"))
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "in the app (tmux 120×36)\t%.2f\t%.2f×\t\n", app.Seconds(), float64(app)/float64(quiet))
	return tw.Flush()
}

// inTmux runs the binary in a detached tmux session and returns the time
// until its app says the run finished (or failed).
func inTmux(ctx context.Context, self string, args []string) (time.Duration, error) {
	// A run that never says it finished (a prompt nobody answers) ends
	// the bench, not the machine's patience.
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	session := fmt.Sprintf("lloyal-bench-%d", os.Getpid())
	words := []string{shellQuote(self)}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	// The run inside tmux is the tmux server's child, not this process's:
	// it ends by itself (the demo run, then 30 s for the last screen), and
	// the session is killed when the bench ends.
	line := strings.Join(words, " ")
	start := time.Now()
	if out, err := runChild(ctx, "tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "36", line+"; sleep 30"); err != nil {
		return 0, fmt.Errorf("tmux: %v %s", err, out)
	}
	defer runChild(context.Background(), "tmux", "kill-session", "-t", session)
	for {
		out, _ := runChild(ctx, "tmux", "capture-pane", "-t", session, "-p")
		scr := string(out)
		switch {
		case strings.Contains(scr, "run finished"):
			return time.Since(start), nil
		case strings.Contains(scr, "run failed"):
			return 0, fmt.Errorf("the run in the app failed:\n%s", scr)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return 0, ctx.Err() // stopped (Ctrl-C): no screen to explain
			}
			return 0, fmt.Errorf("the run in the app never said it finished (%w); last screen:\n%s", ctx.Err(), scr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
