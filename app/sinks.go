package app

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/fold"
	"github.com/lloyal-ai/lloyal/internal/termtext"
	"github.com/lloyal-ai/lloyal/internal/ui"
	"github.com/lloyal-ai/lloyal/trace"
)

// start makes the approval broker, the sinks every event goes to (the
// trace, the summary's fold and the view) and the runtime over them.
func (r *run) start() error {
	o := r.o
	r.mode = approvals.ModeNobody
	switch {
	case o.View == ViewApp:
		r.mode = approvals.ModeTUI
	case IsTerminal(o.Stdin):
		r.mode = approvals.ModeLine
	}
	broker, err := o.Approvals.Broker(r.mode)
	if err != nil {
		return err
	}
	if p := broker.Store.Problem(); p != nil {
		fmt.Fprintln(o.Stderr, "warning:", p)
	}
	r.broker = broker
	// The summary reads the same fold as the screen and the log.
	// Whole seconds: a file system may keep modification times no finer.
	r.summary = &summary{st: fold.NewState(), trace: r.tw.Path(), workspace: o.Workspace, since: time.Now().Truncate(time.Second)}
	sinks := []engine.Sink{r.tw, r.summary, r.view()}
	eo := engine.Options{Sinks: sinks, Approver: broker, MaxInflight: o.MaxInflight, Logprobs: o.Logprobs, LogprobTop: o.LogprobTop, Replay: o.Replay,
		KeepImage: func(data []byte) error { return trace.Keep(r.tw.Path(), data) }}
	if o.Model != nil {
		r.rt = engine.New(o.Model, eo)
	} else {
		r.rt = engine.NewOnServer(o.Server, eo)
	}
	broker.LogTo(r.rt.Emit)
	return nil
}

// view is the sink that shows the run: the app's bridge, JSON lines or the
// readable log.
func (r *run) view() engine.Sink {
	if r.o.View == ViewApp {
		r.bridge = ui.NewBridge()
		return r.bridge
	}
	r.out = newOutQueue(r.o.Stdout)
	out := r.out
	switch r.o.View {
	case ViewJSONL:
		// JSON-escaped, so the terminal writer around out finds nothing to
		// change and the lines stay valid JSON.
		enc := json.NewEncoder(termtext.NewJSONWriter(out))
		return engine.SinkFunc(func(e event.Event) { _ = enc.Encode(e) })
	}
	log := trace.NewLog()
	return engine.SinkFunc(func(e event.Event) {
		if line := log.Line(e); line != "" {
			fmt.Fprintln(out, line)
		}
	})
}
