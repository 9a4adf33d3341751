package serverbackend_test

// Hostile servers: what a server answers is never authority. Redirects
// never carry credentials to another origin; a turn ends at its token
// limit, its wall limit and within bounded memory whatever the server
// streams; a web page is named as one; token counts no request could hold
// are set aside; refused calls spend turns; a looping turn is not an answer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
	"github.com/lloyal-ai/lloyal/engine/serverbackend"
)

// hostile is a chat server (fakeChat) whose hooks may take a request over
// first: all sees every request, turn the chat requests (n counts them
// from 1). A hook answers true when it answered.
type hostile struct {
	f    *fakeChat
	all  func(w http.ResponseWriter, r *http.Request) bool
	turn func(w http.ResponseWriter, r *http.Request, n int) bool
	n    atomic.Int32
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.all != nil && h.all(w, r) {
		return
	}
	if r.URL.Path == "/v1/chat/completions" && h.turn != nil && h.turn(w, r, int(h.n.Add(1))) {
		return
	}
	h.f.ServeHTTP(w, r)
}

// start serves h on 127.0.0.1 until the test ends.
func (h *hostile) start(t *testing.T) *httptest.Server {
	if h.f == nil {
		h.f = &fakeChat{style: chatStyle{finish: "tool_calls"}}
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// sendDelta writes one chat-completion chunk; false once the client is gone.
func sendDelta(w http.ResponseWriter, r *http.Request, delta map[string]any, finish any) bool {
	b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
	if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
		return false
	}
	w.(http.Flusher).Flush()
	return r.Context().Err() == nil
}

// callDelta is a tool-call chunk's delta: the call's name (first) or a
// piece of its arguments.
func callDelta(name, args string) map[string]any {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	return map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "c1", "type": "function", "function": fn}}}
}

// elsewhere is another server: it records every request that reaches it
// and answers as a chat server would, so a run that followed a redirect
// there would complete without a word.
type elsewhere struct {
	f    fakeChat
	mu   sync.Mutex
	hdrs []http.Header
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.hdrs = append(e.hdrs, r.Header.Clone())
	e.mu.Unlock()
	e.f.ServeHTTP(w, r)
}

// runSpec runs one agent on c with spec's limits (lookup and report as
// the tools), bounded by 20 s.
func runSpec(t *testing.T, c *serverbackend.Client, rec *recorder, spec engine.PoolSpec) engine.AgentResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	spec.System, spec.Tools = "You research tides.", []engine.Tool{lookup}
	spec.Terminal = engine.Terminal("report", "Report.", engine.ReportSchema)
	spec.Orchestrate = engine.Parallel(engine.AgentSpec{Task: "question 0"})
	spec.SoftLimit, spec.HardLimit = 256, 128
	res, err := engine.NewOnServer(c, engine.Options{Sinks: []engine.Sink{rec}, MaxInflight: 1}).Run(ctx, spec)
	if ctx.Err() != nil {
		t.Fatal("the run was still going after 20 s")
	}
	if err != nil && !errors.Is(err, engine.ErrBackendFailed) {
		t.Fatal(err)
	}
	return res.Agents[0]
}

// The key and LLOYAL_HEADERS go to the server the user named and nowhere
// else: a redirect to another origin (here the same host on another port,
// where Go's client would send even the key) is refused before anything
// is sent there, naming both origins; a redirect within the origin is
// followed only as a 307 or 308, which keeps the request's body.
func TestRedirectsKeepCredentialsWithTheirOrigin(t *testing.T) {
	for _, c := range []struct {
		name  string
		code  int
		cross bool // to another origin (else a path of the same server)
		probe bool // every path redirects, Dial's probes too (else turns only)
		want  []string
	}{
		{name: "another origin, 302, at the probe", code: http.StatusFound, cross: true, probe: true, want: []string{"another origin"}},
		{name: "another origin, 307, at a turn", code: http.StatusTemporaryRedirect, cross: true, want: []string{"another origin"}},
		{name: "another origin, 308, at a turn", code: http.StatusPermanentRedirect, cross: true, want: []string{"another origin"}},
		{name: "same origin, 302, at a turn", code: http.StatusFound, want: []string{"302 Found", "307 and 308"}},
		{name: "same origin, 307, at a turn", code: http.StatusTemporaryRedirect},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := &elsewhere{f: fakeChat{style: chatStyle{finish: "tool_calls"}}}
			otherSrv := httptest.NewServer(other)
			t.Cleanup(otherSrv.Close)
			h := &hostile{}
			h.all = func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Query().Get("moved") != "" || (!c.probe && r.URL.Path != "/v1/chat/completions") {
					return false
				}
				to := r.URL.Path + "?moved=1"
				if c.cross {
					to = otherSrv.URL + to
				}
				http.Redirect(w, r, to, c.code)
				return true
			}
			srv := h.start(t)
			o := serverbackend.Options{URL: srv.URL, Model: "m", APIKey: "k", Headers: map[string]string{"X-Gateway-Key": "secret"}}
			cl, err := serverbackend.Dial(t.Context(), o)
			if c.cross {
				c.want = append(c.want, srv.URL, otherSrv.URL)
			}
			var reason string
			if c.probe {
				if err == nil {
					cl.Close()
					t.Fatal("Dial followed the redirect")
				}
				reason = err.Error()
			} else {
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cl.Close)
				a := runSpec(t, cl, &recorder{}, engine.PoolSpec{})
				reason = a.Reason
				if c.want == nil {
					if a.Outcome != event.Returned || a.Text() != "found it" {
						t.Fatalf("agent %s %q (%s): a 307 within the origin is followed", a.Outcome, a.Text(), a.Reason)
					}
					h.f.mu.Lock()
					defer h.f.mu.Unlock()
					for i, b := range h.f.bodies {
						if msgs, _ := b["messages"].([]any); len(msgs) == 0 || h.f.hdrs[i].Get("X-Gateway-Key") != "secret" {
							t.Fatalf("redirected request %d: %d messages, X-Gateway-Key %q: want the body and headers kept", i, len(msgs), h.f.hdrs[i].Get("X-Gateway-Key"))
						}
					}
				} else if a.Outcome != event.Failed {
					t.Fatalf("agent %s (%s): want it failed on the redirect", a.Outcome, a.Reason)
				}
			}
			for _, w := range c.want {
				if !strings.Contains(reason, w) {
					t.Fatalf("%q does not say %q", reason, w)
				}
			}
			other.mu.Lock()
			defer other.mu.Unlock()
			if len(other.hdrs) > 0 {
				t.Fatalf("the other origin received %d requests (Authorization %q, X-Gateway-Key %q): want none", len(other.hdrs), other.hdrs[0].Get("Authorization"), other.hdrs[0].Get("X-Gateway-Key"))
			}
		})
	}
}

// A turn ends at its limits whatever the server streams: at its token
// limit (a call whose arguments never end is cut and asked for again, text
// that never ends is cut), within MaxTurnBytes whatever the size of the
// pieces, and at --turn-timeout however often the server sends a byte.
// The server's request is aborted: it streams no further.
func TestServerTurnIsBounded(t *testing.T) {
	const maxTokens = 200
	// bound is the most pieces a hook sends (the test's own bound).
	const bound = 100000
	// words is size bytes of text that never loops.
	words := func(i, size int) string {
		var b strings.Builder
		for b.Len() < size {
			fmt.Fprintf(&b, " w%d", i)
			i = i*7 + 3
		}
		return b.String()
	}
	for _, c := range []struct {
		name string
		// turn answers the first turn: true when the client went away
		// before the hook's own bound.
		turn  func(w http.ResponseWriter, r *http.Request) bool
		o     serverbackend.Options
		nudge string // the first turn's refusal (the run goes on)
		// reports: the agent then reports (a cut call of huge pieces fills
		// the context instead: the agent ends, its memory bounded).
		reports bool
		fail    string // or the agent's failure
	}{
		{name: "endless call arguments", nudge: "turn_cut", reports: true, turn: func(w http.ResponseWriter, r *http.Request) bool {
			sendDelta(w, r, callDelta("lookup", `{"q": "`), nil)
			i := 0
			for ; i < bound && sendDelta(w, r, callDelta("", words(i, 8)), nil); i++ {
			}
			sendDelta(w, r, map[string]any{}, "tool_calls")
			return i < bound
		}},
		{name: "call arguments in huge pieces", nudge: "turn_cut", turn: func(w http.ResponseWriter, r *http.Request) bool {
			sendDelta(w, r, callDelta("lookup", `{"q": "`), nil)
			i := 0
			for ; i < bound/100 && sendDelta(w, r, callDelta("", words(i, 16<<10)), nil); i++ {
			}
			sendDelta(w, r, map[string]any{}, "tool_calls")
			return i < bound/100
		}},
		{name: "endless text", turn: func(w http.ResponseWriter, r *http.Request) bool {
			i := 0
			for ; i < bound && sendDelta(w, r, map[string]any{"content": words(i, 4)}, nil); i++ {
			}
			sendDelta(w, r, map[string]any{}, "stop")
			return i < bound
		}},
		{name: "keep-alives", o: serverbackend.Options{TurnTimeout: 300 * time.Millisecond}, fail: "--turn-timeout", turn: func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/event-stream")
			i := 0
			for ; i < 500 && r.Context().Err() == nil; i++ {
				if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
					break
				}
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
			return i < 500
		}},
		{name: "a trickle of text", o: serverbackend.Options{TurnTimeout: 300 * time.Millisecond}, fail: "--turn-timeout", turn: func(w http.ResponseWriter, r *http.Request) bool {
			i := 0
			for ; i < 500 && sendDelta(w, r, map[string]any{"content": words(i, 2)}, nil); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			return i < 500
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			aborted := make(chan bool, 1)
			h := &hostile{turn: func(w http.ResponseWriter, r *http.Request, n int) bool {
				if n > 1 {
					return false
				}
				aborted <- c.turn(w, r)
				return true
			}}
			srv := h.start(t)
			c.o.URL, c.o.Model = srv.URL, "m"
			cl, err := serverbackend.Dial(t.Context(), c.o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			rec := &recorder{}
			a := runSpec(t, cl, rec, engine.PoolSpec{MaxTurnTokens: maxTokens})
			if !<-aborted {
				t.Fatal("the server streamed to its own bound: its request was not aborted at the turn's limit")
			}
			if c.fail != "" {
				if a.Outcome != event.Failed || !strings.Contains(a.Reason, c.fail) {
					t.Fatalf("agent %s (%s): want it failed, naming %s", a.Outcome, a.Reason, c.fail)
				}
				return
			}
			turns := rec.of(event.AgentTurn)
			if len(turns) == 0 || len(turns[0].Text) > engine.MaxTurnBytes(maxTokens) || turns[0].Tokens > maxTokens {
				t.Fatalf("the first turn held %d bytes in %d pieces: want at most %d in %d", len(turns[0].Text), turns[0].Tokens, engine.MaxTurnBytes(maxTokens), maxTokens)
			}
			if c.nudge != "" {
				if n := rec.of(event.AgentNudge); len(n) == 0 || n[0].Reason != c.nudge {
					t.Fatalf("nudges %+v: want the cut call refused back (%s)", n, c.nudge)
				}
			}
			if c.reports && (a.Outcome != event.Returned || a.Text() != "found it") {
				t.Fatalf("agent %s %q (%s): want it to go on and report", a.Outcome, a.Text(), a.Reason)
			}
		})
	}
}

// A web page where the API's answer should be (a login page, a proxy's
// error page) is named as one, with its status and what to check, not
// read as a cut stream ("unexpected EOF") or a parse error.
func TestServerAnsweringHTMLSaysSo(t *testing.T) {
	page := func(code int) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(code)
			fmt.Fprint(w, "<!doctype html><html><body><form>Sign in</form></body></html>")
		}
	}
	for _, c := range []struct {
		name  string
		probe bool
		page  func(w http.ResponseWriter)
		want  string
	}{
		{"a login page at the probe", true, page(http.StatusOK), "200 OK with text/html, not JSON"},
		{"a proxy's error page at a turn", false, page(http.StatusBadGateway), "502 Bad Gateway with text/html, not JSON"},
		{"a page at a turn", false, page(http.StatusOK), "200 OK with text/html, not JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &hostile{}
			h.all = func(w http.ResponseWriter, r *http.Request) bool {
				if c.probe || r.URL.Path == "/v1/chat/completions" {
					c.page(w)
					return true
				}
				return false
			}
			srv := h.start(t)
			cl, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m"})
			reason := ""
			if c.probe {
				if err == nil {
					cl.Close()
					t.Fatal("Dial took a web page for the API")
				}
				reason = err.Error()
			} else {
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cl.Close)
				a := runSpec(t, cl, &recorder{}, engine.PoolSpec{})
				if a.Outcome != event.Failed {
					t.Fatalf("agent %s: want it failed", a.Outcome)
				}
				reason = a.Reason
			}
			if !strings.Contains(reason, c.want) || !strings.Contains(reason, "--server") {
				t.Fatalf("%q: want %q and what to check (--server)", reason, c.want)
			}
		})
	}
}

// A server claiming more prompt tokens than any request could hold is not
// believed: the agent is not stopped as though its context were full, and
// the run says once that the count was set aside.
func TestHugeTokenClaimsAreSetAside(t *testing.T) {
	f := &fakeChat{style: chatStyle{finish: "tool_calls"}, prompt: 1_000_000_000}
	cl := dialChat(t, f, serverbackend.Options{})
	rec := &recorder{}
	res := runPool(t, cl, rec, 2, 2, nil)
	for _, a := range res.Agents {
		if a.Outcome != event.Returned || a.Text() != "found it" {
			t.Fatalf("agent %d: %s %q (%s): a count the context cannot hold must not stop it", a.ID, a.Outcome, a.Text(), a.Reason)
		}
	}
	var notes []event.Event
	for _, e := range rec.of(event.PoolNote) {
		if e.Role == "server_count_clamped" {
			notes = append(notes, e)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0].Reason, "1000000000 prompt tokens") {
		t.Fatalf("notes %+v: want one saying the 1000000000 prompt tokens were set aside", notes)
	}
	for _, e := range rec.of(event.PoolTick) {
		if e.CellsUsed >= cl.NCtx() {
			t.Fatalf("%d of %d cells used: the claim was believed", e.CellsUsed, cl.NCtx())
		}
	}
}

// Refused calls spend turns: a server whose every call is refused (an
// unknown tool, invalid arguments) stops its agent a bounded number of
// requests after its turns are spent.
func TestRefusedCallsSpendTurns(t *testing.T) {
	for _, c := range []struct{ name, tool, args, nudge string }{
		{"unknown tool", "nosuch", `{}`, "unknown_tool"},
		{"invalid arguments", "lookup", `{"q": 42}`, "invalid_arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &hostile{turn: func(w http.ResponseWriter, r *http.Request, n int) bool {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				sendDelta(w, r, callDelta(c.tool, c.args), nil)
				sendDelta(w, r, map[string]any{}, "tool_calls")
				fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
				return true
			}}
			srv := h.start(t)
			cl, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			rec := &recorder{}
			const maxTurns = 2
			a := runSpec(t, cl, rec, engine.PoolSpec{MaxTurns: maxTurns})
			// Its turns, at most 8 refusals past them (as nudges to
			// report), and a recovery turn.
			if n := int(h.n.Load()); n > maxTurns+8+1 {
				t.Fatalf("%d requests: want at most %d", n, maxTurns+8+1)
			}
			drops := rec.of(event.AgentDrop)
			if a.Outcome == event.Returned || len(drops) == 0 || drops[0].Reason != "max_turns" {
				t.Fatalf("agent %s (%s), drops %+v: want it stopped at max_turns", a.Outcome, a.Reason, drops)
			}
			if n := rec.of(event.AgentNudge); len(n) == 0 || n[0].Reason != c.nudge {
				t.Fatalf("nudges %+v: want %s", n, c.nudge)
			}
		})
	}
}

// Prose that falls into a loop is cut there and asked for again: it is
// never the agent's answer.
func TestLoopingProseIsNotTheAnswer(t *testing.T) {
	h := &hostile{turn: func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n > 1 {
			return false
		}
		sendDelta(w, r, map[string]any{"content": "The tide turns."}, nil)
		for i := 0; i < 400 && sendDelta(w, r, map[string]any{"content": " Run."}, nil); i++ {
		}
		sendDelta(w, r, map[string]any{}, "stop")
		return true
	}}
	srv := h.start(t)
	cl, err := serverbackend.Dial(t.Context(), serverbackend.Options{URL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	rec := &recorder{}
	a := runSpec(t, cl, rec, engine.PoolSpec{})
	if a.Outcome != event.Returned || a.Text() != "found it" || a.Source != "voluntary_return" {
		t.Fatalf("agent %s %q (%s, %s): want the loop asked again, then its report", a.Outcome, a.Text(), a.Source, a.Reason)
	}
	if n := rec.of(event.AgentNudge); len(n) == 0 || n[0].Reason != "loop" || len(n[0].Result) == 0 {
		t.Fatalf("nudges %+v: want the loop refused back", n)
	}
}

// On ollama's /api/generate too, a turn ends at its token limit however
// long the server streams: the request is aborted there.
func TestOllamaTurnIsBounded(t *testing.T) {
	const bound = 100000
	aborted := make(chan bool, 1)
	f := &fakeOllama{t: t}
	f.hook = onlyFirst(func(w http.ResponseWriter, r *http.Request, prompt string) bool {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		i := 0
		for ; i < bound && r.Context().Err() == nil; i++ {
			if enc.Encode(map[string]any{"response": fmt.Sprintf(" w%d", i), "done": false}) != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		aborted <- i < bound
		return true
	}, 1)
	srv := f.start(t)
	c := dial(t, srv, serverbackend.Options{})
	rec := &recorder{}
	a := runSpec(t, c, rec, engine.PoolSpec{MaxTurnTokens: 100})
	if !<-aborted {
		t.Fatal("the server streamed to its own bound: its request was not aborted at the turn's limit")
	}
	turns := rec.of(event.AgentTurn)
	if len(turns) == 0 {
		t.Fatal("no turn")
	}
	if turns[0].Tokens > 100 {
		t.Fatalf("the first turn held %d pieces: want it cut at 100", turns[0].Tokens)
	}
	if a.Outcome == event.Running {
		t.Fatalf("agent %s", a.Outcome)
	}
	checkClosed(t, f, c)
}
