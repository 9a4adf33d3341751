package serverbackend_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/approvals"
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/harness"
	"github.com/lloyal-ai/lloyal/internal/demoranker"
	"github.com/lloyal-ai/lloyal/internal/modelgen"
	"github.com/lloyal-ai/lloyal/internal/ollamatest"
	"github.com/lloyal-ai/lloyal/services"
	"github.com/lloyal-ai/lloyal/trace"
)

// The model the real-server tests load: the generated tiny model (random
// weights, ChatML), with room for the harness's context.
const tinyName = "lloyal-tiny"

var (
	ollamaOnce sync.Once
	ollamaBin  string
)

// startOllama starts a real ollama server (built from lloyal's ollama
// module) with the generated tiny model loaded.
func startOllama(t *testing.T, parallel int) *ollamatest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs a real ollama server")
	}
	ollamaOnce.Do(func() { ollamaBin = ollamatest.Binary(t) })
	if ollamaBin == "" {
		t.Fatal("the ollama build failed (see the first test's log)")
	}
	srv := ollamatest.Start(t, ollamaBin, parallel)
	o := modelgen.Tiny()
	o.CtxTrain = 16384
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(p, o); err != nil {
		t.Fatal(err)
	}
	srv.CreateWith(t, tinyName, p, ollamatest.ChatMLTools) // its chat endpoint takes tools
	srv.Load(t, tinyName, 16384)
	return srv
}

// noLeaks fails when a goroutine of the engine or a client connection is
// still alive once the run is over and the client closed.
func noLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "lloyal/engine.") || strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "serverbackend.(*Client)") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the run:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// approveAll answers every approval request through the broker, as a
// person at the app's approval prompt would (allow once).
type approveAll struct {
	broker *approvals.Broker
	asked  atomic.Int32
}

func (a *approveAll) Emit(e event.Event) {
	if e.Type != event.ApprovalRequested {
		return
	}
	a.asked.Add(1)
	go func() { _ = a.broker.Answer(e.CallID, event.Decision{Answer: event.AllowOnce, By: "user"}) }()
}

// The research harness, end to end, on a real ollama server: the planner,
// parallel researchers with their tools and sub-agents, the publisher whose
// write_note is approved by a person; the trace names the server and model
// and never the key, and replays.
func TestResearchHarnessOnOllama(t *testing.T) {
	srv := startOllama(t, 4)
	const key = "sk-test-never-in-a-trace"
	c, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: tinyName, APIKey: key, NCtx: 16384, RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.Dialect() != serverbackend.Ollama || c.NCtx() != 16384 || c.Format().Kind != "chatml" {
		t.Fatalf("dialect %s, context %d, format %s: want ollama, 16384, chatml (from the vocabulary)", c.Dialect(), c.NCtx(), c.Format().Kind)
	}
	dir := t.TempDir()
	// Walked: random weights never call a tool on their own.
	f, err := harness.Builtin("research")
	if err == nil {
		f, err = f.With(harness.Profiles(false, true, c.NCtx())...)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Its services as a run opens them (the demo reranker: no llama.cpp).
	svcs, err := services.Open(t.Context(), f.ServiceSpecs(), demoranker.Opener(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svcs.Close()
	h, err := f.Build(harness.Options{Workspace: filepath.Join(dir, "notes"), Services: svcs})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Fit(c.NCtx(), 0)
	tp := filepath.Join(dir, "run.jsonl")
	tw, err := trace.Create(tp, trace.Header{Model: event.ModelInfo{Ref: tinyName, Name: tinyName, Format: string(c.Format().Kind)}, Sampling: h.Sampling,
		Context: trace.ContextInfo{NCtx: c.NCtx()}, Server: &trace.ServerInfo{URL: c.Name(), Dialect: string(c.Dialect()), Model: tinyName},
		Tools: h.ToolInfos()})
	if err != nil {
		t.Fatal(err)
	}
	broker := approvals.NewBroker(approvals.Open(filepath.Join(dir, "grants.json")))
	person := &approveAll{broker: broker}
	rt := engine.NewOnServer(c, engine.Options{Sinks: []engine.Sink{tw, person}, Approver: broker, MaxInflight: 4})
	broker.LogTo(rt.Emit)
	res, err := h.Run(t.Context(), rt)
	if cerr := tw.Close("completed"); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	c.Close()
	noLeaks(t)

	if len(res) == 0 {
		t.Fatal("no agent ran")
	}
	for _, a := range res {
		if !a.Ok() && a.Reason == "" {
			t.Fatalf("agent %d %s without a reason", a.ID, a.Outcome)
		}
	}
	if person.asked.Load() == 0 {
		t.Fatal("the publisher's write_note never asked for approval")
	}
	notes, _ := os.ReadDir(filepath.Join(dir, "notes"))
	if len(notes) == 0 {
		t.Fatal("the approved note was not saved")
	}
	u := c.Usage()
	if u.Requests == 0 || u.PromptTokens == 0 || u.Tokens == 0 {
		t.Fatalf("usage %+v: want the server's token counts", u)
	}

	chk, err := trace.CheckFile(tp)
	if err != nil || len(chk.Problems) != 0 || chk.Close == nil || chk.Header == nil || chk.Header.Server == nil {
		t.Fatalf("trace: %v %+v", err, chk)
	}
	if s := chk.Header.Server; s.URL != srv.URL || s.Model != tinyName || s.Dialect != "ollama" {
		t.Fatalf("trace header names %+v: want %s, %s", s, srv.URL, tinyName)
	}
	raw, _ := os.ReadFile(tp)
	if strings.Contains(string(raw), key) {
		t.Fatal("the API key is in the trace")
	}
	st := trace.Stats{}
	answered := 0
	if _, _, err := trace.Follow(t.Context(), tp, false, func(e event.Event) error {
		st.Collect(e)
		if e.Type == event.ApprovalAnswered {
			answered++
		}
		return nil
	}); err != nil {
		t.Fatalf("replaying the trace: %v", err)
	}
	if answered == 0 || st.ApprovalsAsked == 0 {
		t.Fatalf("the trace replays %d approvals asked, %d answered", st.ApprovalsAsked, answered)
	}
}

// reportPool runs agents that each write one forced report: on a random
// model every agent's outcome is decided by the server, not by the text.
func reportPool(t *testing.T, c *serverbackend.Client, agents int, sinks ...engine.Sink) *engine.PoolResult {
	t.Helper()
	res, err := reportPoolErr(t, c, agents, sinks...)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	return res
}

// reportPoolErr is reportPool with the run's error, for runs the server
// may leave with nothing.
func reportPoolErr(t *testing.T, c *serverbackend.Client, agents int, sinks ...engine.Sink) (*engine.PoolResult, error) {
	t.Helper()
	rt := engine.NewOnServer(c, engine.Options{Sinks: sinks, MaxInflight: agents})
	var specs []engine.AgentSpec
	for i := range agents {
		specs = append(specs, engine.AgentSpec{Task: "Say where the tide turns, in a few words. Case " + string(rune('A'+i)) + "."})
	}
	res, err := rt.Run(t.Context(), engine.PoolSpec{System: "You answer briefly.", Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(specs...), MaxTurnTokens: 160, MaxTurns: 2, SoftLimit: 512, HardLimit: 256,
		Sampling: engine.Sampling{Temperature: 0.7, Seed: 1}})
	return res, err
}

// A server killed mid-run ends the agents whose requests it had, with the
// reason; the run returns (nothing hangs) and leaves nothing behind.
func TestOllamaKilledMidRun(t *testing.T) {
	srv := startOllama(t, 4)
	c, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: tinyName, NCtx: 16384, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := engine.SinkFunc(func(e event.Event) {
		if e.Type == event.PoolTick { // answers are streaming: now
			once.Do(func() { go srv.Kill() })
		}
	})
	res, err := reportPoolErr(t, c, 4, kill)
	if err != nil && !errors.Is(err, engine.ErrBackendFailed) {
		t.Fatalf("pool: %v", err)
	}
	failed := 0
	for _, a := range res.Agents {
		if a.Outcome == event.Failed {
			failed++
			if !strings.Contains(a.Reason, "the server failed") {
				t.Fatalf("agent %d failed with %q: want the server's failure", a.ID, a.Reason)
			}
		}
	}
	if failed == 0 {
		t.Fatalf("no agent failed when the server died: %+v", res.Agents)
	}
	// A pool the dead server left with no result says so; one where an
	// agent finished first does not.
	if (failed == len(res.Agents)) != (err != nil) {
		t.Fatalf("%d of %d agents failed, and the run's error is %v", failed, len(res.Agents), err)
	}
	c.Close()
	noLeaks(t)
}

// faultProxy stands in front of a real server: it refuses the first
// requests (429, then 503) and cuts one stream after its first lines.
type faultProxy struct {
	target  string
	tr      *http.Transport // its own: its connections are closed with it
	mu      sync.Mutex
	n       int
	refuse  []int // status codes for the first requests
	cutNth  int   // the request (1-based, after the refusals) whose stream is cut
	cutDone bool
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// Turns only: not Dial's load of the model (a generate without a prompt).
	gen := r.URL.Path == "/api/generate" && strings.Contains(string(body), `"prompt"`) || r.URL.Path == "/v1/chat/completions"
	cut := false
	if gen {
		p.mu.Lock()
		p.n++
		n := p.n
		if n <= len(p.refuse) {
			code := p.refuse[n-1]
			p.mu.Unlock()
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "server busy, please try again"})
			return
		}
		cut = n-len(p.refuse) == p.cutNth
		p.mu.Unlock()
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.Path, strings.NewReader(string(body)))
	req.Header = r.Header.Clone()
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	lines := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
			w.(http.Flusher).Flush()
			lines++
		}
		if cut && lines == 2 {
			// The connection drops mid-answer.
			if conn, _, herr := w.(http.Hijacker).Hijack(); herr == nil {
				conn.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// 429 and 503 park the agent until the server takes it (Retry-After
// honoured); a stream cut mid-answer ends only its agent: on ollama's raw
// /api/generate and on its /v1/chat/completions alike.
func TestOllamaBehindAFaultyProxy(t *testing.T) {
	srv := startOllama(t, 4)
	for _, api := range []serverbackend.Dialect{serverbackend.Ollama, serverbackend.Chat} {
		t.Run(string(api), func(t *testing.T) { faultyProxyRun(t, srv, api) })
	}
}

func faultyProxyRun(t *testing.T, srv *ollamatest.Server, api serverbackend.Dialect) {
	fp := &faultProxy{target: srv.URL, tr: &http.Transport{}, refuse: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, cutNth: 2}
	proxy := httptest.NewServer(fp)
	defer proxy.Close()
	c, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: proxy.URL, Model: tinyName, NCtx: 16384, RequestTimeout: time.Minute, API: api})
	if err != nil {
		t.Fatal(err)
	}
	if c.Dialect() != api {
		t.Fatalf("dialect %s, want %s", c.Dialect(), api)
	}
	var mu sync.Mutex
	var retries []event.Event
	rec := engine.SinkFunc(func(e event.Event) {
		if e.Type == event.ToolRetry {
			mu.Lock()
			retries = append(retries, e)
			mu.Unlock()
		}
	})
	res := reportPool(t, c, 3, rec)
	// The others end as their (random) text decides: never by the server.
	cut := 0
	for _, a := range res.Agents {
		switch {
		case a.Outcome == event.Failed && strings.Contains(a.Reason, "was cut"):
			cut++
		case strings.Contains(a.Reason, "server"):
			t.Fatalf("agent %d: %s (%s): only the cut stream's agent may end on the server's account", a.ID, a.Outcome, a.Reason)
		}
	}
	if cut != 1 {
		t.Fatalf("%d agents ended by a cut stream: want the one whose stream was cut (%+v)", cut, res.Agents)
	}
	// The requests race to the proxy: which agent meets which refusal is
	// theirs to decide.
	codes := map[string]int{}
	for _, r := range retries {
		for _, c := range []string{"429", "503"} {
			if r.Tool == "server" && strings.Contains(r.Reason, c) {
				codes[c]++
			}
		}
	}
	if len(retries) != 2 || codes["429"] != 1 || codes["503"] != 1 {
		t.Fatalf("retries %+v: want two parks, one on 429 and one on 503", retries)
	}
	c.Close()
	proxy.CloseClientConnections()
	fp.tr.CloseIdleConnections()
	noLeaks(t)
}

// A 401 from the server (behind a gateway that wants a key) ends the run
// at once, every agent with it, on both of ollama's endpoints.
func TestOllamaRefusedCredentials(t *testing.T) {
	srv := startOllama(t, 4)
	for _, api := range []serverbackend.Dialect{serverbackend.Ollama, serverbackend.Chat} {
		t.Run(string(api), func(t *testing.T) {
			fp := &faultProxy{target: srv.URL, tr: &http.Transport{}, refuse: []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized}}
			proxy := httptest.NewServer(fp)
			defer proxy.Close()
			c, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: proxy.URL, Model: tinyName, NCtx: 16384, RequestTimeout: time.Minute, API: api})
			if err != nil {
				t.Fatal(err)
			}
			res, err := reportPoolErr(t, c, 3)
			if !errors.Is(err, engine.ErrRefused) {
				t.Fatalf("run error %v: want the refusal", err)
			}
			for _, a := range res.Agents {
				if a.Outcome != event.Failed {
					t.Fatalf("agent %d: %s", a.ID, a.Outcome)
				}
			}
			c.Close()
			proxy.CloseClientConnections()
			fp.tr.CloseIdleConnections()
		})
	}
	noLeaks(t)
}
