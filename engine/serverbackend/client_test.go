package serverbackend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
	"github.com/lloyal-ai/lloyal/fold"
)

// fakeOllama is an in-process server speaking ollama's /api/generate: a
// stand-in model that calls lookup on its first turn and report after it
// has read a result. Hooks let a test refuse, cut or stall a request.
type fakeOllama struct {
	t        *testing.T
	mu       sync.Mutex
	prompts  []string
	options  []map[string]any
	inflight int
	most     int
	// hook runs before the answer; returning true means it answered.
	hook      func(w http.ResponseWriter, r *http.Request, prompt string) bool
	openConns func() int
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/version":
		fmt.Fprint(w, `{"version":"0.17.4"}`)
	case "/api/show":
		fmt.Fprint(w, `{"template":"{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>{{ end }}","model_info":{"general.architecture":"llama","llama.context_length":4096}}`)
	case "/api/generate":
		var req struct {
			Prompt  string         `json:"prompt"`
			Raw     bool           `json:"raw"`
			Format  map[string]any `json:"format"`
			Options map[string]any `json:"options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Raw {
			http.Error(w, `{"error":"want a raw prompt"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.prompts = append(f.prompts, req.Prompt)
		f.options = append(f.options, req.Options)
		f.inflight++
		f.most = max(f.most, f.inflight)
		hook := f.hook
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.inflight--
			f.mu.Unlock()
		}()
		if hook != nil && hook(w, r, req.Prompt) {
			return
		}
		answer := `<tool_call>
{"name": "lookup", "arguments": {"q": "tides"}}
</tool_call>`
		if strings.Contains(req.Prompt, "<tool_response>") {
			answer = `<tool_call>
{"name": "report", "arguments": {"result": "found it"}}
</tool_call>`
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		n := 0
		for piece := range strings.SplitSeq(answer, " ") {
			if n > 0 {
				piece = " " + piece
			}
			_ = enc.Encode(map[string]any{"response": piece, "done": false})
			w.(http.Flusher).Flush()
			n++
		}
		_ = enc.Encode(map[string]any{"response": "", "done": true, "done_reason": "stop", "prompt_eval_count": len(req.Prompt) / 3, "eval_count": n})
	default:
		http.NotFound(w, r)
	}
}

// start serves f and counts its connections; the test fails if any is
// still open when it ends.
func (f *fakeOllama) start(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(f)
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f.openConns = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(open)
	}
	return srv
}

var lookup = engine.Typed(engine.ToolSpec{Name: "lookup", Description: "Look something up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`), Fanout: true},
	func(ctx context.Context, a struct{ Q string }) (any, error) {
		return map[string]string{"found": "the tide turns at noon"}, nil
	})

// onlyFirst applies hook to the first n requests only.
func onlyFirst(hook func(http.ResponseWriter, *http.Request, string) bool, n int) func(http.ResponseWriter, *http.Request, string) bool {
	var mu sync.Mutex
	seen := 0
	return func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		mu.Lock()
		seen++
		mine := seen <= n
		mu.Unlock()
		if mine {
			return hook(w, r, prompt)
		}
		return false
	}
}

func dial(t *testing.T, srv *httptest.Server, o serverbackend.Options) *serverbackend.Client {
	t.Helper()
	o.URL, o.Model = srv.URL, "tiny"
	c, err := serverbackend.Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type recorder struct {
	mu     sync.Mutex
	evs    []event.Event
	runErr error // what runPool's run returned
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

func (r *recorder) of(t event.Type) []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.Event
	for _, e := range r.evs {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

func runPool(t *testing.T, c *serverbackend.Client, rec *recorder, agents int, inflight int, ctl func(rt *engine.Runtime)) *engine.PoolResult {
	t.Helper()
	rt := engine.NewOnServer(c, engine.Options{Sinks: []engine.Sink{rec}, MaxInflight: inflight})
	if ctl != nil {
		ctl(rt)
	}
	var tasks []engine.AgentSpec
	for i := range agents {
		tasks = append(tasks, engine.AgentSpec{Task: fmt.Sprintf("question %d", i)})
	}
	res, err := rt.Run(context.Background(), engine.PoolSpec{
		System: "You research tides.", Tools: []engine.Tool{lookup},
		Terminal:    engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(tasks...), SoftLimit: 256, HardLimit: 128,
	})
	if err != nil && !errors.Is(err, engine.ErrBackendFailed) {
		t.Fatal(err)
	}
	rec.runErr = err // a pool the server left with nothing says so
	return res
}

// checkClosed fails when the client left a connection open after Close.
func checkClosed(t *testing.T, f *fakeOllama, c *serverbackend.Client) {
	t.Helper()
	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for f.openConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to the server are still open after the run and Close", f.openConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	noLeaks(t)
}

func TestAgentsRunOnServer(t *testing.T) {
	f := &fakeOllama{t: t}
	// The first requests wait (up to a second) for a third to arrive beside
	// them: with --max-inflight 2 none may.
	third := make(chan struct{})
	var once sync.Once
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		f.mu.Lock()
		n := f.inflight
		f.mu.Unlock()
		if n > 2 {
			once.Do(func() { close(third) })
		}
		select {
		case <-third:
		case <-time.After(time.Second):
		}
		return false
	}
	f.hook = onlyFirst(f.hook, 2)
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{NCtx: 2048})
	if c.Dialect() != serverbackend.Ollama || c.NCtx() != 2048 || c.Format().Kind != "chatml" {
		t.Fatalf("dialect %s, ctx %d, format %s: want ollama, 2048 (asked), chatml (its template)", c.Dialect(), c.NCtx(), c.Format().Kind)
	}
	rec := &recorder{}
	res := runPool(t, c, rec, 5, 2, nil)
	// The screen's fold counts every piece an agent was sent, however many
	// came in one tick.
	st := fold.NewState()
	rec.mu.Lock()
	for _, e := range rec.evs {
		st.Apply(e)
	}
	rec.mu.Unlock()
	for _, a := range res.Agents {
		if a.Outcome != event.Returned || a.Text() != "found it" || a.ToolCalls != 2 {
			t.Fatalf("agent %d: %s %q after %d calls (%s); want returned \"found it\" after lookup and report", a.ID, a.Outcome, a.Text(), a.ToolCalls, a.Reason)
		}
		if got := st.Agents[a.ID].Tokens; got != a.Tokens {
			t.Fatalf("the fold counts %d tokens for agent %d, it wrote %d", got, a.ID, a.Tokens)
		}
	}
	// Every prompt starts with the same spine bytes: the server's prefix
	// cache can share them.
	spine := rec.of(event.SpineCreate)[0].Text
	for _, p := range f.prompts {
		if !strings.HasPrefix(p, spine) {
			t.Fatalf("a prompt does not start with the spine:\n%q\nspine:\n%q", p[:min(len(p), 200)], spine)
		}
	}
	if len(f.prompts) != 10 {
		t.Fatalf("%d requests: want 2 turns × 5 agents", len(f.prompts))
	}
	if f.most > 2 {
		t.Fatalf("%d requests in flight at once: --max-inflight 2 allows 2", f.most)
	}
	if u := c.Usage(); u.Requests != 10 || u.PromptTokens == 0 || u.Tokens == 0 {
		t.Fatalf("usage %+v: want 10 requests with the server's token counts", u)
	}
	checkClosed(t, f, c)
}

func TestBusyServerParksTheAgent(t *testing.T) {
	f := &fakeOllama{t: t}
	var mu sync.Mutex
	refused := 0
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		mu.Lock()
		defer mu.Unlock()
		if refused < 3 {
			refused++
			code := http.StatusTooManyRequests
			if refused == 2 {
				code = http.StatusServiceUnavailable
			}
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(code)
			fmt.Fprint(w, `{"error":"server busy, please try again"}`)
			return true
		}
		return false
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rec := &recorder{}
	res := runPool(t, c, rec, 1, 1, nil)
	if a := res.Agents[0]; a.Outcome != event.Returned {
		t.Fatalf("agent %s (%s): a busy server must park it, not end it", a.Outcome, a.Reason)
	}
	retries := rec.of(event.ToolRetry)
	if len(retries) != 3 || retries[0].Tool != "server" || !strings.Contains(retries[0].Reason, "429") || !strings.Contains(retries[1].Reason, "503") {
		t.Fatalf("retries %+v: want 3 parks on the server's 429, 503, 429", retries)
	}
	checkClosed(t, f, c)
}

func TestCutStreamEndsOnlyThatAgent(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		if !strings.Contains(prompt, "question 1") {
			return false
		}
		// Half an answer, then the connection drops.
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"response":"<tool_call>","done":false}`)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rec := &recorder{}
	res := runPool(t, c, rec, 3, 3, nil)
	for _, a := range res.Agents {
		cut := strings.Contains(a.Task, "question 1")
		switch {
		case cut && (a.Outcome != event.Failed || !strings.Contains(a.Reason, "cut")):
			t.Fatalf("agent %d: %s (%s): want failed, saying its stream was cut", a.ID, a.Outcome, a.Reason)
		case !cut && a.Outcome != event.Returned:
			t.Fatalf("agent %d: %s (%s): the others go on", a.ID, a.Outcome, a.Reason)
		}
	}
	if d := rec.of(event.AgentDrop); len(d) != 1 || d[0].Reason != "server_error" {
		t.Fatalf("drops %+v: want one server_error", d)
	}
	checkClosed(t, f, c)
}

func TestSilentServerTimesOut(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		<-r.Context().Done() // says nothing until the client gives up
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{RequestTimeout: 300 * time.Millisecond})
	rec := &recorder{}
	res := runPool(t, c, rec, 2, 2, nil)
	if !errors.Is(rec.runErr, engine.ErrBackendFailed) {
		t.Fatalf("the run's error %v: want the backend failed", rec.runErr)
	}
	for _, a := range res.Agents {
		if a.Outcome != event.Failed || !strings.Contains(a.Reason, "sent nothing") {
			t.Fatalf("agent %d: %s (%s): want failed, the server sent nothing", a.ID, a.Outcome, a.Reason)
		}
	}
	checkClosed(t, f, c)
}

func TestCancelAbortsTheRequest(t *testing.T) {
	f := &fakeOllama{t: t}
	arrived := make(chan struct{}, 8)
	aborted := make(chan struct{}, 8)
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		if strings.Contains(prompt, "question 1") && strings.Contains(prompt, "<tool_response>") {
			// The other agent finishes only once the cancelled agent's
			// request is aborted: the abort comes with the cancel, not at
			// the end of the run.
			select {
			case <-aborted:
				aborted <- struct{}{}
			case <-time.After(10 * time.Second):
				http.Error(w, `{"error":"the cancelled request was never aborted"}`, http.StatusInternalServerError)
				return true
			}
			return false
		}
		if !strings.Contains(prompt, "question 0") {
			return false
		}
		arrived <- struct{}{}
		<-r.Context().Done()
		aborted <- struct{}{}
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rec := &recorder{}
	res := runPool(t, c, rec, 2, 2, func(rt *engine.Runtime) {
		go func() {
			<-arrived
			rt.Cancel(1)
		}()
	})
	if a := res.Agents[0]; a.Outcome != event.Cancelled {
		t.Fatalf("agent 1: %s (%s): want cancelled", a.Outcome, a.Reason)
	}
	if a := res.Agents[1]; a.Outcome != event.Returned {
		t.Fatalf("agent 2: %s (%s): want returned", a.Outcome, a.Reason)
	}
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled agent's request was not aborted")
	}
	checkClosed(t, f, c)
}

func TestDeadServer(t *testing.T) {
	f := &fakeOllama{t: t}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	srv.CloseClientConnections()
	srv.Close() // nothing listens any more: connections are refused
	rec := &recorder{}
	res := runPool(t, c, rec, 2, 2, nil)
	if !errors.Is(rec.runErr, engine.ErrBackendFailed) || !strings.Contains(rec.runErr.Error(), "cannot reach") {
		t.Fatalf("the run's error %v: want the backend failed, naming why", rec.runErr)
	}
	for _, a := range res.Agents {
		if a.Outcome != event.Failed || !strings.Contains(a.Reason, "cannot reach") {
			t.Fatalf("agent %d: %s (%s): want failed, the server cannot be reached", a.ID, a.Outcome, a.Reason)
		}
	}
	c.Close()
	if _, err := serverbackend.Dial(context.Background(), serverbackend.Options{URL: srv.URL, Model: "tiny"}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("Dial on a dead server: %v; want cannot reach", err)
	}
}

// A model that spends every forced turn on whitespace inside its call (a
// server's JSON constraint allows any amount) is not asked again for ever:
// after its turns it is stopped and recovered, and the run ends.
func TestCutCallsEndAfterMaxTurns(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		fmt.Fprintln(w, `{"response":"{ \n\n   \n","done":false}`)
		fmt.Fprintln(w, `{"response":"","done":true,"done_reason":"length","prompt_eval_count":10,"eval_count":8}`)
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rt := engine.NewOnServer(c, engine.Options{})
	res, err := rt.Run(t.Context(), engine.PoolSpec{System: "s", Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "t"}), MaxTurns: 3, MaxTurnTokens: 8, SoftLimit: 256, HardLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Agents[0]; a.Outcome != event.Failed || !strings.Contains(a.Reason, "recovery failed") {
		t.Fatalf("agent %s (%s): want its recovery to fail after its turns", a.Outcome, a.Reason)
	}
	if n := len(f.prompts); n != 4 {
		t.Fatalf("%d requests: want 3 turns and one recovery turn", n)
	}
	checkClosed(t, f, c)
}

// fakeOpenAI speaks the OpenAI-compatible /v1/completions (vLLM's dialect:
// max_model_len in /v1/models, cached tokens in the usage).
type fakeOpenAI struct {
	mu      sync.Mutex
	prompts []string
	bodies  []map[string]any
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"id":"other"},{"id":"m","max_model_len":4096}]}`)
	case "/v1/completions":
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		prompt, _ := req["prompt"].(string)
		if req["stream"] != true {
			// Dial's probe for raw completions: one token, not a turn.
			fmt.Fprint(w, `{"choices":[{"text":"!","finish_reason":"length"}]}`)
			return
		}
		f.mu.Lock()
		f.prompts = append(f.prompts, prompt)
		f.bodies = append(f.bodies, req)
		f.mu.Unlock()
		answer := `<tool_call>
{"name": "lookup", "arguments": {"q": "tides"}}
</tool_call>`
		if strings.Contains(prompt, "<tool_response>") {
			answer = `<tool_call>
{"name": "report", "arguments": {"result": "found it"}}
</tool_call>`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		n := 0
		for piece := range strings.SplitSeq(answer, " ") {
			if n > 0 {
				piece = " " + piece
			}
			b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"text": piece, "finish_reason": nil}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			n++
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":90}}}\n\n", n)
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func TestOpenAICompatibleServer(t *testing.T) {
	f := &fakeOpenAI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m", APIKey: "k", Format: "chatml"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Dialect() != serverbackend.OpenAI || c.NCtx() != 4096 {
		t.Fatalf("dialect %s, context %d: want openai, 4096 (max_model_len)", c.Dialect(), c.NCtx())
	}
	rec := &recorder{}
	res := runPool(t, c, rec, 3, 3, nil)
	for _, a := range res.Agents {
		if a.Outcome != event.Returned || a.Text() != "found it" {
			t.Fatalf("agent %d: %s %q (%s)", a.ID, a.Outcome, a.Text(), a.Reason)
		}
	}
	spine := rec.of(event.SpineCreate)[0].Text
	for _, p := range f.prompts {
		if !strings.HasPrefix(p, spine) {
			t.Fatalf("a prompt does not start with the spine: %q", p[:min(len(p), 200)])
		}
	}
	if u := c.Usage(); u.Requests != 6 || u.PromptTokens != 600 || u.Evaluated != 60 || u.EvaluatedKnown != 6 {
		t.Fatalf("usage %+v: want 6 requests of 100 prompt tokens, 10 of each evaluated (90 cached)", u)
	}
	c.Close()
	if _, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "nope", APIKey: "k"}); err == nil || !strings.Contains(err.Error(), "other, m") {
		t.Fatalf("a model the server lacks: %v; want the models it has", err)
	}
	if _, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m", APIKey: "wrong"}); err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Fatalf("a wrong key: %v; want the server's refusal", err)
	}
}

// The sampling reaches both dialects under the names each server takes.
// Ollama always gets the repetition penalty (its own default is 1.1, so
// "off" must be said); an OpenAI-compatible server only when one is set.
func TestSamplingReachesTheServer(t *testing.T) {
	for _, c := range []struct {
		name   string
		s      engine.Sampling
		ollama map[string]any // options; nil value: must be absent
		openai map[string]any // body; nil value: must be absent
	}{
		{"defaults", engine.Sampling{Temperature: 0.7, Seed: 3},
			map[string]any{"temperature": 0.7, "seed": 3.0, "repeat_penalty": 1.0, "repeat_last_n": 64.0, "top_k": nil},
			map[string]any{"temperature": 0.7, "seed": 3.0, "repeat_penalty": nil, "repeat_last_n": nil, "repetition_penalty": nil, "top_k": nil}},
		{"penalty 1 is off", engine.Sampling{RepeatPenalty: 1, RepeatLastN: 16},
			map[string]any{"repeat_penalty": 1.0, "repeat_last_n": 16.0},
			map[string]any{"repeat_penalty": nil, "repetition_penalty": nil}},
		{"penalty, default window", engine.Sampling{TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.3},
			map[string]any{"top_k": 40.0, "top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.3, "repeat_last_n": 64.0},
			map[string]any{"top_k": 40.0, "top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.3, "repeat_last_n": 64.0, "repetition_penalty": 1.3}},
		{"penalty and window", engine.Sampling{RepeatPenalty: 1.5, RepeatLastN: 128},
			map[string]any{"repeat_penalty": 1.5, "repeat_last_n": 128.0},
			map[string]any{"repeat_penalty": 1.5, "repeat_last_n": 128.0, "repetition_penalty": 1.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := engine.TurnRequest{Prompt: "<|im_start|>user\nhi<|im_end|>\n", MaxTokens: 8, Sampling: c.s}
			fo := &fakeOllama{t: t}
			oc := dial(t, fo.start(t), serverbackend.Options{})
			if _, err := oc.Generate(t.Context(), tr, func(string) {}); err != nil {
				t.Fatal(err)
			}
			checkClosed(t, fo, oc)
			checkKeys(t, "ollama options", fo.options[0], c.ollama)

			fa := &fakeOpenAI{}
			srv := httptest.NewServer(fa)
			defer srv.Close()
			ac, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m", APIKey: "k", Format: "chatml"})
			if err != nil {
				t.Fatal(err)
			}
			defer ac.Close()
			if _, err := ac.Generate(t.Context(), tr, func(string) {}); err != nil {
				t.Fatal(err)
			}
			checkKeys(t, "openai body", fa.bodies[0], c.openai)
		})
	}
}

// checkKeys compares got's entries with want's (JSON numbers as float64,
// compared as float32 since the sampling holds float32); a nil want value
// means the key must be absent.
func checkKeys(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case w == nil && ok:
			t.Errorf("%s: %s = %v, want it absent", what, k, g)
		case w == nil:
		case !ok:
			t.Errorf("%s: %s absent, want %v", what, k, w)
		default:
			gf, _ := g.(float64)
			if float32(gf) != float32(w.(float64)) {
				t.Errorf("%s: %s = %v, want %v", what, k, g, w)
			}
		}
	}
}

// Pressure on a server: an agent whose conversation nears the server's
// context is nudged to report, as it would be on the local backend.
func TestPressureNudgesOnServer(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		call := `{"name": "lookup", "arguments": {"q": "more"}}`
		if strings.Contains(strings.ToLower(prompt), "call report now") {
			call = `{"name": "report", "arguments": {"result": "found it"}}`
		}
		b, _ := json.Marshal(map[string]any{"response": "<tool_call>\n" + call + "\n</tool_call>", "done": false})
		fmt.Fprintf(w, "%s\n", b)
		fmt.Fprintf(w, `{"response":"","done":true,"done_reason":"stop","prompt_eval_count":%d,"eval_count":20}`+"\n", len(prompt)/3)
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{NCtx: 1024})
	big := engine.Typed(engine.ToolSpec{Name: "lookup", Description: "Look something up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		func(ctx context.Context, a struct{ Q string }) (any, error) {
			return map[string]string{"found": strings.Repeat("tide ", 60)}, nil
		})
	rec := &recorder{}
	rt := engine.NewOnServer(c, engine.Options{Sinks: []engine.Sink{rec}})
	res, err := rt.Run(t.Context(), engine.PoolSpec{System: "s", Tools: []engine.Tool{big}, Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "t"}), MaxTurns: 50, SoftLimit: 256, HardLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Agents[0]; !a.Ok() || a.Text() != "found it" {
		t.Fatalf("agent %s %q (%s): want it nudged or recovered into its report", a.Outcome, a.Text(), a.Reason)
	}
	acted := len(rec.of(event.SettleDeferred)) > 0
	for _, e := range rec.of(event.AgentNudge) {
		acted = acted || e.Reason == "pressure_softcut" || e.Reason == "settle_reject"
	}
	if !acted {
		t.Fatal("no pressure nudge or deferred result: pressure on a server never reached the policy")
	}
	if n := len(f.prompts); n > 40 {
		t.Fatalf("%d turns: pressure should have ended the agent long before its 50 turns", n)
	}
	checkClosed(t, f, c)
}

// A server's JSON constraint lets marker text into a forced call's strings
// (a random model writes "</tool_call>" inside its report): the call still
// reads as one call with its text intact.
func TestMarkersInsideAForcedCall(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		b, _ := json.Marshal(map[string]any{"response": `{"name": "report", "arguments": {"result": "a </tool_call> b <tool_call> c"}}`, "done": false})
		fmt.Fprintf(w, "%s\n", b)
		fmt.Fprintln(w, `{"response":"","done":true,"done_reason":"stop","prompt_eval_count":10,"eval_count":20}`)
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rt := engine.NewOnServer(c, engine.Options{})
	res, err := rt.Run(t.Context(), engine.PoolSpec{System: "s", Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "t"}), SoftLimit: 256, HardLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Agents[0]; a.Outcome != event.Returned || a.Text() != "a </tool_call> b <tool_call> c" {
		t.Fatalf("agent %s %q (%s): want the report with its text intact", a.Outcome, a.Text(), a.Reason)
	}
	checkClosed(t, f, c)
}

// ollama ends an answer that repeats a token too often without its last
// record, in a response that is otherwise complete: that is the end of a
// turn cut short, not a broken stream.
func TestAnswerEndedWithoutItsLastRecord(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		b, _ := json.Marshal(map[string]any{"response": `<tool_call>
{"name": "report", "arguments": {"result": "found it`, "done": false})
		fmt.Fprintf(w, "%s\n", b)
		return true // the handler returns: the response ends cleanly
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rt := engine.NewOnServer(c, engine.Options{})
	res, err := rt.Run(t.Context(), engine.PoolSpec{System: "s", Terminal: engine.Terminal("report", "Report.", engine.ReportSchema),
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "t"}), SoftLimit: 256, HardLimit: 128})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Agents[0]; a.Outcome != event.Returned || a.Text() != "found it" {
		t.Fatalf("agent %s %q (%s): want the cut report salvaged", a.Outcome, a.Text(), a.Reason)
	}
	checkClosed(t, f, c)
}

// A server's answer that falls into a loop is cut there, as a local one is:
// the request is aborted, the report salvaged from what came before, and
// the stop traced as agent:nudge loop.
func TestLoopOnServerIsCut(t *testing.T) {
	f := &fakeOllama{t: t}
	f.hook = func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]any{"response": `<tool_call>` + "\n" + `{"name": "report", "arguments": {"result": "The tide turns.`, "done": false})
		for i := 0; i < 400 && r.Context().Err() == nil; i++ {
			_ = enc.Encode(map[string]any{"response": " Run.", "done": false})
			w.(http.Flusher).Flush()
		}
		_ = enc.Encode(map[string]any{"response": "", "done": true, "done_reason": "length", "eval_count": 401})
		return true
	}
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{NCtx: 4096})
	rec := &recorder{}
	res := runPool(t, c, rec, 1, 1, nil)
	a := res.Agents[0]
	loops := 0
	for _, e := range rec.of(event.AgentNudge) {
		if e.Reason == "loop" {
			loops++
		}
	}
	if loops != 1 || a.Source != "loop_salvaged" || strings.Count(a.Text(), "Run.") > 1 || !strings.HasPrefix(a.Text(), "The tide turns.") {
		t.Fatalf("%d loop nudges; the agent %s %q (%s)", loops, a.Outcome, a.Text(), a.Source)
	}
	checkClosed(t, f, c)
}

// A server's /v1/models is read one model at a time, to 16 MiB: its
// models decoded into one slice cost gigabytes for a 64 MiB list of empty
// objects, and the error named every one of millions.
func TestDialReadsAHugeModelListOneAtATime(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{4 << 20, fmt.Sprintf("and %d more", 4<<20+1-20)},
		{6 << 20, "the answer to /v1/models is longer than lloyal reads of it"},
	} {
		body := `{"data":[` + strings.Repeat(`{},`, c.n) + `{"id":"last"}]}`
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				fmt.Fprint(w, body)
				return
			}
			http.NotFound(w, r)
		}))
		_, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m"})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 2048 {
			t.Fatalf("%d models: %.300v (%d bytes)", c.n+1, err, len(fmt.Sprint(err)))
		}
	}
}
