package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/internal/enginetest"
)

var call = enginetest.ToolCall

func report(text string) string {
	b, _ := json.Marshal(map[string]string{"result": text})
	return call("report", string(b))
}

type rig struct {
	be   *enginetest.Scripted
	rt   *engine.Runtime
	rec  *engine.Recorder
	b    *Broker
	ran  atomic.Int32
	tool engine.Tool
}

func newRig(t *testing.T, b *Broker) *rig {
	r := &rig{be: enginetest.New(1 << 16), rec: &engine.Recorder{}, b: b}
	r.tool = engine.Func{S: engine.ToolSpec{Name: "write_note", Description: "Writes a note into the workspace.", Protected: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		Fn: func(ctx context.Context, _ json.RawMessage) (any, error) {
			r.ran.Add(1)
			return map[string]string{"written": "ok"}, nil
		}}
	o := engine.Options{Sinks: []engine.Sink{r.rec}}
	if b != nil {
		o.Approver = b
	}
	r.rt = engine.New(r.be, o)
	return r
}

func (r *rig) run(t *testing.T, tasks ...string) *engine.PoolResult {
	t.Helper()
	var specs []engine.AgentSpec
	for _, task := range tasks {
		specs = append(specs, engine.AgentSpec{Task: task})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := r.rt.Run(ctx, engine.PoolSpec{Tools: []engine.Tool{r.tool}, Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(specs...)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.b.pendingOrNil()); n != 0 {
		t.Fatalf("%d requests left pending", n)
	}
	return res
}

func (b *Broker) pendingOrNil() []event.ApprovalRequest {
	if b == nil {
		return nil
	}
	return b.Pending()
}

// answerWith answers every request as it arrives (from another goroutine, as
// a person at a keyboard would).
func answerWith(b *Broker, d func(event.ApprovalRequest) event.Decision) {
	b.OnRequest = func(r event.ApprovalRequest) {
		go func() { _ = b.Answer(r.CallID, d(r)) }()
	}
}

func TestFailClosedWithoutApproverOrWatcher(t *testing.T) {
	r := newRig(t, nil)
	r.be.Script("writer", call("write_note", `{"text":"hi"}`), report("done"))
	r.run(t, "writer")
	if r.ran.Load() != 0 {
		t.Fatal("protected Execute ran with no approver")
	}
	// Nobody watching (input not a terminal): the flags' policy denies.
	f := Config{GrantsFile: t.TempDir() + "/g.json"}
	b, err := f.Broker(ModeNobody)
	if err != nil {
		t.Fatal(err)
	}
	r = newRig(t, b)
	r.be.Script("writer", call("write_note", `{"text":"hi"}`), report("done"))
	r.run(t, "writer")
	if r.ran.Load() != 0 {
		t.Fatal("protected Execute ran with nobody to approve")
	}
	// The denial names the tool to grant, for the person reading the log.
	if a := r.rec.Of(event.ApprovalAnswered); len(a) != 1 || !strings.Contains(a[0].Reason, "rerun with --grant write_note") {
		t.Fatalf("answers %+v", a)
	}
}

func TestAllowOnceRunsOnceAndAsksAgain(t *testing.T) {
	b := NewBroker(Open(""))
	asked := atomic.Int32{}
	answerWith(b, func(event.ApprovalRequest) event.Decision {
		if asked.Add(1) == 1 {
			return event.Decision{Answer: event.AllowOnce}
		}
		return event.Decision{Answer: event.Deny}
	})
	r := newRig(t, b)
	r.be.Script("writer", call("write_note", `{"text":"hi"}`), call("write_note", `{"text":"hi"}`), report("done"))
	r.run(t, "writer")
	if r.ran.Load() != 1 || asked.Load() != 2 {
		t.Fatalf("ran %d, asked %d; want 1 and 2", r.ran.Load(), asked.Load())
	}
	// The allowed run is the same call (same id) that asked.
	req, disp := r.rec.Of(event.ApprovalRequested), r.rec.Of(event.ToolDispatch)
	// I18: the request names the agent, the tool, the arguments and why.
	calls := r.rec.Of(event.AgentToolCall)
	if q := req[0]; q.Agent == 0 || q.Agent != calls[0].Agent || q.Tool != "write_note" || string(q.Args) != `{"text":"hi"}` || q.Text == "" || q.CallID != calls[0].CallID {
		t.Fatalf("approval request %+v for call %+v", q, calls[0])
	}
	if len(disp) != 1 || disp[0].CallID != req[0].CallID {
		t.Fatalf("dispatched %+v for request %+v", disp, req[0])
	}
}

func TestSessionGrantCoversLaterCalls(t *testing.T) {
	b := NewBroker(Open(""))
	asked := atomic.Int32{}
	answerWith(b, func(event.ApprovalRequest) event.Decision {
		asked.Add(1)
		return event.Decision{Answer: event.AllowSession}
	})
	r := newRig(t, b)
	r.be.Script("writer", call("write_note", `{"text":"1"}`), call("write_note", `{"text":"2"}`), call("write_note", `{"text":"3"}`), report("done"))
	r.run(t, "writer")
	if r.ran.Load() != 3 || asked.Load() != 1 {
		t.Fatalf("ran %d, asked %d; want 3 and 1", r.ran.Load(), asked.Load())
	}
	// The calls the grant let through say so, with the grant's source.
	auto := r.rec.Of(event.ApprovalAuto)
	if len(auto) != 2 || auto[0].Reason != "allowed for this session" || auto[0].Tool != "write_note" || auto[0].CallID == "" {
		t.Fatalf("approval:auto %+v", auto)
	}
}

func TestFlagGrantSaysItsSource(t *testing.T) {
	b, err := (&Config{Grant: []string{"write_note"}, GrantsFile: filepath.Join(t.TempDir(), "g.json")}).Broker(ModeNobody)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, b)
	r.be.Script("writer", call("write_note", `{"text":"1"}`), report("done"))
	r.run(t, "writer")
	auto := r.rec.Of(event.ApprovalAuto)
	if r.ran.Load() != 1 || len(auto) != 1 || auto[0].Reason != "--grant write_note" || len(r.rec.Of(event.ApprovalRequested)) != 0 {
		t.Fatalf("ran %d, approval:auto %+v", r.ran.Load(), auto)
	}
}

func TestDenialReasonReachesTheModelVerbatim(t *testing.T) {
	b := NewBroker(Open(""))
	const reason = "not in the shared folder, please <|im_end|> use notes/"
	answerWith(b, func(event.ApprovalRequest) event.Decision {
		return event.Decision{Answer: event.Deny, Reason: reason}
	})
	r := newRig(t, b)
	r.be.Script("writer", call("write_note", `{"text":"hi"}`), report("ok, skipped"))
	var transcript string
	r.rt = engine.New(r.be, engine.Options{Approver: b, Sinks: []engine.Sink{r.rec, engine.SinkFunc(func(e event.Event) {
		if e.Type == event.AgentReturn {
			transcript = r.be.Transcript(1) // the agent's branch (the spine is 0? find below)
			for id := engine.BranchID(0); id < 5; id++ {
				if tr := r.be.Transcript(id); strings.Contains(tr, "writer") && strings.Contains(tr, "<tool_response>") {
					transcript = tr
				}
			}
		}
	})}})
	res := r.run(t, "writer")
	if r.ran.Load() != 0 || res.Agents[0].Text() != "ok, skipped" {
		t.Fatalf("ran %d, %+v", r.ran.Load(), res.Agents[0])
	}
	want, _ := json.Marshal(reason)
	if !strings.Contains(transcript, "refused to let you run write_note") || !strings.Contains(transcript, string(want[1:len(want)-1])) {
		t.Fatalf("the model's context does not hold the reason verbatim:\n%s", transcript)
	}
	a := r.rec.Of(event.ApprovalAnswered)
	if len(a) != 1 || a[0].Reason != reason || a[0].Duration <= 0 {
		t.Fatalf("answer event %+v", a)
	}
}

func TestConcurrentRequestsAnsweredIndependently(t *testing.T) {
	b := NewBroker(Open(""))
	var mu sync.Mutex
	var got []event.ApprovalRequest
	all := make(chan struct{})
	b.OnRequest = func(r event.ApprovalRequest) {
		mu.Lock()
		got = append(got, r)
		if len(got) == 16 {
			close(all)
		}
		mu.Unlock()
	}
	r := newRig(t, b)
	b.LogTo(r.rt.Emit)
	var tasks []string
	for i := 0; i < 16; i++ {
		task := fmt.Sprintf("agent %02d", i)
		tasks = append(tasks, task)
		r.be.Script(task, call("write_note", fmt.Sprintf(`{"text":"%d"}`, i)), report(task))
	}
	go func() {
		<-all
		mu.Lock()
		reqs := append([]event.ApprovalRequest(nil), got...)
		mu.Unlock()
		rand.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		for i, q := range reqs {
			d := event.Decision{Answer: event.Deny, Reason: "odd"}
			if q.Agent%2 == 0 {
				d = event.Decision{Answer: event.AllowOnce}
			}
			_ = b.Answer(q.CallID, d)
			if i%3 == 0 { // a duplicate, in random order
				if err := b.Answer(q.CallID, event.Decision{Answer: event.AllowAlways}); err != ErrAlreadyAnswered {
					t.Errorf("duplicate answer: %v", err)
				}
			}
		}
	}()
	res := r.run(t, tasks...)
	if len(res.Agents) != 16 {
		t.Fatalf("%d agents", len(res.Agents))
	}
	allowed := 0
	for _, e := range r.rec.Of(event.ApprovalAnswered) {
		if strings.Contains(string(e.Data), "allow_once") {
			allowed++
		}
	}
	if r.ran.Load() != int32(allowed) || allowed != 8 {
		t.Fatalf("ran %d, allowed %d; want 8 and 8", r.ran.Load(), allowed)
	}
	if b.Store.Allowed("write_note", "") {
		t.Fatal("a duplicate answer changed the grants")
	}
	if d := r.rec.Of(event.ApprovalDuplicate); len(d) != 6 {
		t.Fatalf("%d duplicate answers logged, want 6", len(d))
	}
}

func TestTimeoutAndCancelResolvePendingRequests(t *testing.T) {
	b := NewBroker(Open(""))
	b.Timeout = 30 * time.Millisecond
	r := newRig(t, b)
	r.be.Script("slowpoke", call("write_note", `{"text":"hi"}`), report("gave up"))
	res := r.run(t, "slowpoke")
	a := r.rec.Of(event.ApprovalAnswered)
	if r.ran.Load() != 0 || len(a) != 1 || !strings.Contains(string(a[0].Data), `"by":"timeout"`) || res.Agents[0].Outcome != event.Returned {
		t.Fatalf("timeout: ran %d, answers %+v, agent %+v", r.ran.Load(), a, res.Agents[0])
	}

	b2 := NewBroker(Open(""))
	r2 := newRig(t, b2)
	b2.OnRequest = func(q event.ApprovalRequest) { go r2.rt.Cancel(q.Agent) }
	r2.be.Script("cancelled", call("write_note", `{"text":"hi"}`), report("never"))
	res = r2.run(t, "cancelled")
	if res.Agents[0].Outcome != event.Cancelled || r2.ran.Load() != 0 || len(b2.Pending()) != 0 {
		t.Fatalf("cancel: %+v, ran %d, pending %d", res.Agents[0], r2.ran.Load(), len(b2.Pending()))
	}
	// An answer that arrives after the cancel changes nothing.
	req := r2.rec.Of(event.ApprovalRequested)[0]
	if err := b2.Answer(req.CallID, event.Decision{Answer: event.AllowAlways}); err != ErrAlreadyAnswered || r2.ran.Load() != 0 || b2.Store.Allowed("write_note", "") {
		t.Fatalf("late answer: %v, ran %d", err, r2.ran.Load())
	}
}

func TestRunInterruptedWhileWaitingLeavesNothingPending(t *testing.T) {
	b := NewBroker(Open(""))
	r := newRig(t, b)
	r.be.Script("waiter", call("write_note", `{"text":"hi"}`), report("never"))
	ctx, cancel := context.WithCancel(context.Background())
	b.OnRequest = func(event.ApprovalRequest) { go cancel() }
	res, err := r.rt.Run(ctx, engine.PoolSpec{Tools: []engine.Tool{r.tool}, Orchestrate: engine.Parallel(engine.AgentSpec{Task: "waiter"})})
	if err == nil || res.Agents[0].Outcome != event.Cancelled {
		t.Fatalf("%v %+v", err, res)
	}
	if len(b.Pending()) != 0 || r.ran.Load() != 0 {
		t.Fatalf("pending %d, ran %d", len(b.Pending()), r.ran.Load())
	}
}

func TestParkedAgentCostsNothingWhileSiblingsRun(t *testing.T) {
	b := NewBroker(Open(""))
	release := make(chan string, 1)
	b.OnRequest = func(q event.ApprovalRequest) { release <- q.CallID }
	r := newRig(t, b)
	r.be.Script("asker", call("write_note", `{"text":"hi"}`), report("asked"))
	r.be.Script("worker", unlooped("busy ", 200))
	var askerBranch engine.BranchID
	var samplesAtAsk, cellsAtAsk int
	r.rt = engine.New(r.be, engine.Options{Approver: b, Sinks: []engine.Sink{r.rec, engine.SinkFunc(func(e event.Event) {
		switch e.Type {
		case event.AgentSpawn:
			if e.Text == "asker" {
				askerBranch = engine.BranchID(e.Branch)
			}
		case event.ApprovalRequested:
			samplesAtAsk, cellsAtAsk = r.be.Samples(askerBranch), r.be.Unique(askerBranch)
		case event.AgentReturn:
			if strings.Contains(string(e.Result), "busy") { // the sibling finished while the asker waited
				if s, c := r.be.Samples(askerBranch), r.be.Unique(askerBranch); s != samplesAtAsk || c != cellsAtAsk {
					t.Errorf("parked agent sampled %d times and grew %d cells while waiting", s-samplesAtAsk, c-cellsAtAsk)
				}
				_ = b.Answer(<-release, event.Decision{Answer: event.AllowOnce})
			}
		}
	})}})
	res := r.run(t, "asker", "worker")
	if r.ran.Load() != 1 || len(res.Agents) != 2 {
		t.Fatalf("ran %d, %+v", r.ran.Load(), res.Agents)
	}
}

func TestParseAnswer(t *testing.T) {
	cases := map[string]event.Decision{
		"y\n": {Answer: event.AllowOnce, By: "user"},
		"n":   {Answer: event.Deny, By: "user"},
		"r":   {Answer: event.Deny, By: "user"}, // the prompter asks for the reason next
		"s":   {Answer: event.AllowSession, By: "user"},
		"A":   {Answer: event.AllowAlways, By: "user"},
		// "a" meant "always" in the app before the one table; it is no
		// answer now, so it denies (with itself as the reason) rather than
		// saving a grant.
		"a":                  {Answer: event.Deny, Reason: "a", By: "user"},
		"use notes/ instead": {Answer: event.Deny, Reason: "use notes/ instead", By: "user"},
	}
	for in, want := range cases {
		got, ok := ParseAnswer(in)
		if !ok || got != want {
			t.Errorf("%q: %+v", in, got)
		}
	}
	if _, ok := ParseAnswer("  \n"); ok {
		t.Error("an empty line answered")
	}
}

// prompting runs a line prompter over b reading in, for the test's life;
// what it wrote is in the builder.
func prompting(t *testing.T, b *Broker, in io.Reader) *strings.Builder {
	var out strings.Builder
	lp := NewLinePrompter(b, in, &out)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go lp.Run(ctx)
	return &out
}

func TestLinePrompter(t *testing.T) {
	b := NewBroker(Open(""))
	out := prompting(t, b, strings.NewReader("\nnot that file\n"))
	ch := b.Request(event.ApprovalRequest{CallID: "c1", Agent: 3, Tool: "write_note", Why: "Writes a note.", Args: json.RawMessage(`{"path":"a.md","text":"x"}`)})
	select {
	case d := <-ch:
		if d.Answer != event.Deny || d.Reason != "not that file" {
			t.Fatalf("decision %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if s := out.String(); !strings.Contains(s, "agent 3 wants to run the protected tool write_note") || !strings.Contains(s, `"path": "a.md"`) {
		t.Fatalf("prompt:\n%s", s)
	}
}

// Once the prompter's input has closed (Ctrl-D at a prompt) nobody is
// left to answer: the request asked is denied, and so is every later one,
// at once, where it waited for ever (no --approval-timeout).
func TestLinePrompterInputClosedDeniesLaterRequests(t *testing.T) {
	b := NewBroker(Open(""))
	prompting(t, b, strings.NewReader(""))
	for _, id := range []string{"c1", "c2", "c3"} {
		select {
		case d := <-b.Request(event.ApprovalRequest{CallID: id, Agent: 1, Tool: "write_note"}):
			if d.Answer != event.Deny || !strings.Contains(d.Reason, "input closed") {
				t.Fatalf("%s: %+v", id, d)
			}
		case <-time.After(time.Minute): // no timeout is set: a minute is for ever
			t.Fatalf("%s: no decision after the input closed (pending: %d)", id, len(b.Pending()))
		}
	}
}

// A prompter whose queue is full denies a further request at once rather
// than blocking the runtime that asks (OnRequest must not block).
func TestLinePrompterQueueFullDenies(t *testing.T) {
	b := NewBroker(Open(""))
	NewLinePrompter(b, strings.NewReader(""), io.Discard) // never run: nobody takes requests
	for i := range 256 {
		b.Request(event.ApprovalRequest{CallID: fmt.Sprint("c", i), Agent: 1, Tool: "write_note"})
	}
	done := make(chan event.Decision, 1)
	go func() { done <- <-b.Request(event.ApprovalRequest{CallID: "one-more", Agent: 1, Tool: "write_note"}) }()
	select {
	case d := <-done:
		if d.Answer != event.Deny || !strings.Contains(d.Reason, "256 calls already wait") {
			t.Fatalf("one more: %+v", d)
		}
	case <-time.After(time.Minute):
		t.Fatal("a request past the prompter's queue blocked")
	}
}

func TestWindDownResolvesPendingRequests(t *testing.T) {
	b := NewBroker(Open(""))
	r := newRig(t, b)
	b.OnRequest = func(event.ApprovalRequest) { go r.rt.WindDown() }
	r.be.Script("asker", call("write_note", `{"text":"hi"}`), report("finished up"))
	res := r.run(t, "asker")
	a := r.rec.Of(event.ApprovalAnswered)
	if len(a) != 1 || !strings.Contains(string(a[0].Data), `"answer":"deny"`) || r.ran.Load() != 0 {
		t.Fatalf("answers %+v, ran %d", a, r.ran.Load())
	}
	if res.Agents[0].Outcome == event.Running || len(b.Pending()) != 0 {
		t.Fatalf("%+v, pending %d", res.Agents[0], len(b.Pending()))
	}
}

func TestLinePrompterDenyWithAReasonKey(t *testing.T) {
	b := NewBroker(Open(""))
	out := prompting(t, b, strings.NewReader("r\nuse notes/\n"))
	select {
	case d := <-b.Request(event.ApprovalRequest{CallID: "c1", Agent: 1, Tool: "write_note", Args: json.RawMessage(`{}`)}):
		if d.Answer != event.Deny || d.Reason != "use notes/" {
			t.Fatalf("decision %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if s := out.String(); !strings.Contains(s, "[y] allow once") || !strings.Contains(s, "reason (the model reads it)") {
		t.Fatalf("prompt:\n%s", s)
	}
}

// Issue #19, finding 4: `run --headless </dev/zero` grew past 7.7 GB as
// the prompter read one endless line. A line over MaxAnswer is skipped
// (the allocation for 64 MiB of it is measured) and the next line answers.
func TestLinePrompterSkipsOverlongLines(t *testing.T) {
	b := NewBroker(Open(""))
	in := io.MultiReader(io.LimitReader(zeros{}, 64<<20), strings.NewReader("\nn\n"))
	var out syncBuilder
	lp := NewLinePrompter(b, in, &out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go lp.Run(ctx)
	select {
	case d := <-b.Request(event.ApprovalRequest{CallID: "c1", Agent: 1, Tool: "write_note", Args: json.RawMessage(`{}`)}):
		if d.Answer != event.Deny || d.Reason != "" {
			t.Fatalf("decision %+v, want the plain deny typed after the long line", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("reading a 64 MiB line allocated %d bytes", alloc)
	}
	if !strings.Contains(out.String(), "was ignored") {
		t.Fatalf("the skipped line was not reported:\n%s", out.String())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuilder) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// unlooped is strings.Repeat(unit, n) that the runtime's loop detector
// never stops: copies with an upper-case first letter follow the
// Thue–Morse sequence, which repeats no block three times running.
func unlooped(unit string, n int) string {
	var b strings.Builder
	for i := range n {
		if bits.OnesCount(uint(i))%2 == 1 {
			b.WriteString(strings.ToUpper(unit[:1]) + unit[1:])
		} else {
			b.WriteString(unit)
		}
	}
	return b.String()
}
