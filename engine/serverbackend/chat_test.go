package serverbackend_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/lloyal-ai/lloyal/tools"
)

// chatStyle is how a server streams a tool call: the shapes vLLM, SGLang,
// llama-server and hosted APIs differ in.
type chatStyle struct {
	idEveryDelta bool   // the call's id in every delta, not the first only
	noIndex      bool   // deltas without an index (one call)
	argsObject   bool   // arguments as a JSON object, whole, not pieces of a string
	finish       string // finish_reason of a call: tool_calls or stop
	reasoning    string // reasoning_content, reasoning or "" (none)
	noDone       bool   // the stream ends without data: [DONE]
}

// fakeChat is an OpenAI-compatible server with chat completions only: no
// raw /v1/completions, so Dial must pick the chat dialect.
type fakeChat struct {
	style  chatStyle
	status int    // answer every chat request with this status, when set
	ctx    int    // max_model_len (default 4096)
	badQ   bool   // the first call's arguments fail lookup's schema (q a number)
	always bool   // calls lookup every turn, whatever tool_choice says
	prompt int    // the prompt_tokens it reports (default 120)
	vision bool   // /props says its model sees images, as llama-server's does
	call   string // the tool it calls and its arguments, "name {args}" (default lookup {"q": "tides"})
	mu     sync.Mutex
	bodies []map[string]any
	raw    []string
	hdrs   []http.Header
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"m","max_model_len":%d}]}`, cmp.Or(f.ctx, 4096))
	case "/props":
		fmt.Fprintf(w, `{"modalities":{"vision":%v,"audio":false}}`, f.vision)
	case "/v1/chat/completions":
		raw, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(raw, &req)
		f.mu.Lock()
		f.bodies = append(f.bodies, req)
		f.raw = append(f.raw, string(raw))
		f.hdrs = append(f.hdrs, r.Header.Clone())
		f.mu.Unlock()
		if f.status != 0 {
			http.Error(w, `{"error":{"message":"invalid api key"}}`, f.status)
			return
		}
		msgs, _ := req["messages"].([]any)
		name, args := "lookup", `{"q": "tides"}`
		if f.call != "" {
			name, args, _ = strings.Cut(f.call, " ")
		}
		if f.badQ && len(msgs) == 2 {
			args = `{"q": 42}`
		}
		if last, _ := msgs[len(msgs)-1].(map[string]any); !f.always && last["role"] == "tool" && !(f.badQ && strings.Contains(fmt.Sprint(last["content"]), "error")) {
			name, args = "report", `{"result": "found it"}`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		s := f.style
		if s.reasoning != "" {
			send(map[string]any{s.reasoning: "I should "}, nil)
			send(map[string]any{s.reasoning: "look it up."}, nil)
		}
		call := func(first bool, fn map[string]any) map[string]any {
			c := map[string]any{"function": fn}
			if !s.noIndex {
				c["index"] = 0
			}
			if first || s.idEveryDelta {
				c["id"], c["type"] = "chatcmpl-tool-7", "function"
			}
			return map[string]any{"tool_calls": []any{c}}
		}
		if s.argsObject {
			var obj map[string]any
			_ = json.Unmarshal([]byte(args), &obj)
			send(call(true, map[string]any{"name": name, "arguments": obj}), nil)
		} else {
			send(call(true, map[string]any{"name": name, "arguments": ""}), nil)
			for _, piece := range []string{args[:5], args[5:]} {
				send(call(false, map[string]any{"arguments": piece}), nil)
			}
		}
		send(map[string]any{}, s.finish)
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n", cmp.Or(f.prompt, 120))
		if !s.noDone {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	default:
		http.NotFound(w, r) // no /v1/completions, no /api/version
	}
}

// Every dialect variant runs the pool to its reports: calls assembled from
// their deltas, reasoning folded like local thinking, and requests that
// carry the tools word for word and the history as messages with matching
// call ids, the same first bytes for every agent.
func TestChatCompletionsDialects(t *testing.T) {
	for _, c := range []struct {
		name  string
		style chatStyle
	}{
		{"vLLM: id first, string pieces, tool_calls", chatStyle{finish: "tool_calls"}},
		{"SGLang: id every delta, reasoning_content", chatStyle{idEveryDelta: true, finish: "tool_calls", reasoning: "reasoning_content"}},
		{"llama-server: no index, stop", chatStyle{noIndex: true, finish: "stop"}},
		{"hosted: arguments as an object, reasoning, no [DONE]", chatStyle{argsObject: true, finish: "tool_calls", reasoning: "reasoning", noDone: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeChat{style: c.style}
			cl := dialChat(t, f, serverbackend.Options{Headers: map[string]string{"X-Team": "tides"}})
			if cl.Dialect() != serverbackend.Chat {
				t.Fatalf("dialect %s: a server without /v1/completions is spoken to in messages", cl.Dialect())
			}
			rec := &recorder{}
			res := runPool(t, cl, rec, 2, 2, nil)
			for _, a := range res.Agents {
				if a.Outcome != event.Returned || a.Text() != "found it" {
					t.Fatalf("agent %d: %s %q (%s)", a.ID, a.Outcome, a.Text(), a.Reason)
				}
			}
			if c.style.reasoning != "" {
				turns := rec.of(event.AgentTurn)
				if len(turns) == 0 || !strings.Contains(turns[0].Text, "<think>I should look it up.</think>") {
					t.Fatalf("first turn %q: want the reasoning between think markers", turns[0].Text)
				}
			}
			if len(f.bodies) != 4 {
				t.Fatalf("%d chat requests, want 4 (two turns of two agents)", len(f.bodies))
			}
			var first []string
			for i, b := range f.bodies {
				tools, _ := json.Marshal(b["tools"])
				if !strings.Contains(f.raw[i], `"parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`) {
					t.Fatalf("request %d %s: want lookup's schema word for word", i, f.raw[i])
				}
				if b["parallel_tool_calls"] != false || f.hdrs[i].Get("X-Team") != "tides" {
					t.Fatalf("request %d: parallel_tool_calls %v, X-Team %q", i, b["parallel_tool_calls"], f.hdrs[i].Get("X-Team"))
				}
				msgs, _ := b["messages"].([]any)
				sys, _ := json.Marshal(msgs[0])
				first = append(first, string(tools)+string(sys))
				if string(sys) != `{"content":"You research tides.","role":"system"}` {
					t.Fatalf("system message %s: the system prompt alone, the tools beside it", sys)
				}
				if len(msgs) == 4 {
					asst, _ := json.Marshal(msgs[2])
					tool, _ := json.Marshal(msgs[3])
					if !strings.Contains(string(asst), `"tool_calls":[{"function":{"arguments":"{\"q\":`) || !strings.Contains(string(asst), `\"tides\"}","name":"lookup"},"id":"call_1","type":"function"}]`) ||
						!strings.Contains(string(tool), `"tool_call_id":"call_1"`) || strings.Contains(string(asst), "think") {
						t.Fatalf("history %s / %s: want the call with id call_1, its result answering it, no reasoning", asst, tool)
					}
				}
			}
			for _, p := range first[1:] {
				if p != first[0] {
					t.Fatal("two agents' requests start with different bytes (tools and system prompt)")
				}
			}
			if got := cl.Usage(); got.Requests != 4 || got.PromptTokens != 480 || got.Evaluated != 80 {
				t.Fatalf("usage %+v: want 4 requests of 120 prompt tokens, 20 of each evaluated", got)
			}
		})
	}
}

// A turn free to write text says auto, one that must call a tool
// required, and the last turn, which must report, names the terminal tool.
func TestChatToolChoice(t *testing.T) {
	for _, c := range []struct {
		choice engine.ToolChoice
		want   []string
	}{
		{engine.ToolAuto, []string{"auto", "report"}},
		{engine.ToolRequired, []string{"required", "report"}},
	} {
		f := &fakeChat{style: chatStyle{finish: "tool_calls"}}
		cl := dialChat(t, f, serverbackend.Options{})
		rt := engine.NewOnServer(cl, engine.Options{MaxInflight: 1})
		if _, err := rt.Run(t.Context(), engine.PoolSpec{System: "You research tides.", Tools: []engine.Tool{lookup}, ToolChoice: c.choice, MaxTurns: 1,
			Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"})}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range f.bodies {
			switch v := b["tool_choice"].(type) {
			case string:
				got = append(got, v)
			case map[string]any:
				fn, _ := v["function"].(map[string]any)
				got = append(got, fmt.Sprint(fn["name"]))
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: tool_choice %v, want %v", c.choice, got, c.want)
		}
	}
}

// 401 and 403 end the run at once, every agent with the server's words,
// and the run's error says to check the credentials.
func TestChatRefusedCredentialsEndTheRun(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		f := &fakeChat{status: status}
		cl := dialChat(t, f, serverbackend.Options{API: serverbackend.Chat})
		rt := engine.NewOnServer(cl, engine.Options{MaxInflight: 1})
		res, err := rt.Run(t.Context(), engine.PoolSpec{System: "You research tides.", Tools: []engine.Tool{lookup},
			Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"}, engine.AgentSpec{Task: "b"}, engine.AgentSpec{Task: "c"})})
		if !errors.Is(err, engine.ErrRefused) || !strings.Contains(err.Error(), "invalid api key") || !strings.Contains(err.Error(), "LLOYAL_API_KEY") {
			t.Fatalf("%d: run error %v", status, err)
		}
		for _, a := range res.Agents {
			if a.Outcome != event.Failed {
				t.Fatalf("%d: agent %d %s", status, a.ID, a.Outcome)
			}
		}
		if len(f.bodies) != 1 {
			t.Fatalf("%d: %d requests: the first refusal must end the run (one in flight at a time)", status, len(f.bodies))
		}
	}
}

func TestParseHeaders(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]string
		bad  bool
	}{
		{"X-Org: acme; x-proj: p1", map[string]string{"X-Org": "acme", "X-Proj": "p1"}, false},
		{"A: b:c\nC-D: e", map[string]string{"A": "b:c", "C-D": "e"}, false},
		{"", map[string]string{}, false},
		{"no colon", nil, true},
		{"bad name: x", nil, true},
	} {
		got, err := serverbackend.ParseHeaders(c.in)
		if (err != nil) != c.bad || (!c.bad && fmt.Sprint(got) != fmt.Sprint(c.want)) {
			t.Errorf("ParseHeaders(%q) = %v, %v", c.in, got, err)
		}
	}
}

// A server whose context is smaller than --ctx is planned for as it is,
// and says so; its own token counts, however far they run past lloyal's
// estimate, never make the context share pass 100 %.
func TestServerContextShareNeverPassesTheContext(t *testing.T) {
	f := &fakeChat{style: chatStyle{finish: "tool_calls"}, ctx: 2048, prompt: 5000}
	cl := dialChat(t, f, serverbackend.Options{NCtx: 8192})
	if cl.NCtx() != 2048 || !strings.Contains(cl.Note(), "2048 tokens, smaller than the 8192 asked for") {
		t.Fatalf("context %d, note %q", cl.NCtx(), cl.Note())
	}
	rec := &recorder{}
	runPool(t, cl, rec, 2, 2, nil)
	st := fold.NewState()
	rec.mu.Lock()
	evs := append([]event.Event(nil), rec.evs...)
	rec.mu.Unlock()
	for _, e := range evs {
		st.Apply(e)
		if e.CellsUsed > cl.NCtx() || (e.NCtx > 0 && e.NCtx != cl.NCtx()) {
			t.Fatalf("%s: %d of %d cells", e.Type, e.CellsUsed, e.NCtx)
		}
	}
	if st.PeakCells > st.NCtx || st.PeakCells == 0 {
		t.Fatalf("peak %d of %d", st.PeakCells, st.NCtx)
	}
}

// A call that fails the tool's schema goes back to the model as an
// {"error"} result answering that call, as on a local model; the model
// then calls again and the agent ends as usual.
func TestChatInvalidArgumentsAreRefusedBack(t *testing.T) {
	f := &fakeChat{style: chatStyle{finish: "tool_calls"}, badQ: true}
	cl := dialChat(t, f, serverbackend.Options{})
	rec := &recorder{}
	res := runPool(t, cl, rec, 1, 1, nil)
	if a := res.Agents[0]; a.Outcome != event.Returned || a.Text() != "found it" {
		t.Fatalf("agent: %s %q (%s)", a.Outcome, a.Text(), a.Reason)
	}
	if n := rec.of(event.AgentNudge); len(n) != 1 || n[0].Reason != "invalid_arguments" {
		t.Fatalf("nudges %+v: want one invalid_arguments", n)
	}
	msgs, _ := f.bodies[1]["messages"].([]any)
	tool, _ := json.Marshal(msgs[len(msgs)-1])
	if !strings.Contains(string(tool), `"role":"tool"`) || !strings.Contains(string(tool), `"tool_call_id":"call_1"`) || !strings.Contains(string(tool), "error") {
		t.Fatalf("the refusal sent back as %s: want a tool message answering call_1 with the error", tool)
	}
}

// A server that ignores tool_choice and calls a tool every turn, though
// the agent's turns are spent, cannot keep the agent for ever: its
// refusals are bounded and the agent ends.
func TestChatServerIgnoringToolChoiceEnds(t *testing.T) {
	f := &fakeChat{style: chatStyle{finish: "tool_calls"}, always: true}
	cl := dialChat(t, f, serverbackend.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rt := engine.NewOnServer(cl, engine.Options{MaxInflight: 1})
	res, err := rt.Run(ctx, engine.PoolSpec{System: "You research tides.", Tools: []engine.Tool{lookup}, MaxTurns: 1,
		Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"})})
	if ctx.Err() != nil {
		t.Fatalf("the run was still going after 20 s and %d requests", len(f.bodies))
	}
	if err != nil && !errors.Is(err, engine.ErrBackendFailed) {
		t.Fatal(err)
	}
	if a := res.Agents[0]; a.Outcome == event.Running || len(f.bodies) > 12 {
		t.Fatalf("agent %s after %d requests", a.Outcome, len(f.bodies))
	}
}

// dialChat starts f as a server and dials it for the model "m" with o;
// both close when the test ends.
func dialChat(t *testing.T, f *fakeChat, o serverbackend.Options) *serverbackend.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	o.URL, o.Model = srv.URL, "m"
	cl, err := serverbackend.Dial(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// An image a tool returns reaches a server's model that sees (llama-server
// says so in /props): the result names it, and the next request carries it
// as an image part in a user message after the tool's; a model that does
// not see gets the result's note that it cannot, and no image.
// A file the person attached (lloyal run --attach: the pool's
// attachments) reaches a model that sees through read_attachment, as an
// image part after the tool's result.
func TestChatShowsAnAttachedImage(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nan attached chart")
	f := &fakeChat{style: chatStyle{finish: "tool_calls"}, vision: true, call: `read_attachment {"name": "chart.png"}`}
	cl := dialChat(t, f, serverbackend.Options{})
	rt := engine.NewOnServer(cl, engine.Options{MaxInflight: 1})
	atts := []engine.Attachment{{Name: "chart.png", MIMEType: "image/png", Data: png}}
	if _, err := rt.Run(t.Context(), engine.PoolSpec{System: "You read charts.", Tools: []engine.Tool{tools.AttachmentTool(atts)}, MaxTurns: 2, Attachments: atts,
		Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"})}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	if last := f.raw[len(f.raw)-1]; !strings.Contains(last, `"type":"image_url"`) || !strings.Contains(last, url) || !strings.Contains(last, `\"name\":\"chart.png\"`) {
		t.Errorf("the request after read_attachment:\n%s", last)
	}
}

func TestChatShowsAToolsImage(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nnot really a chart")
	chart := engine.Typed(engine.ToolSpec{Name: "lookup", Description: "Look up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
		func(context.Context, struct{ Q string }) (any, error) {
			return map[string]any{"text": "the tide chart", "_attachments": []map[string]any{{"name": "tide.png", "mimeType": "image/png", "data": png}}}, nil
		})
	for _, sees := range []bool{true, false} {
		f := &fakeChat{style: chatStyle{finish: "tool_calls"}, vision: sees}
		cl := dialChat(t, f, serverbackend.Options{})
		if cl.CanSee() != sees {
			t.Fatalf("CanSee %v, want %v", cl.CanSee(), sees)
		}
		rt := engine.NewOnServer(cl, engine.Options{MaxInflight: 1})
		if _, err := rt.Run(t.Context(), engine.PoolSpec{System: "You read charts.", Tools: []engine.Tool{chart}, MaxTurns: 3,
			Terminal: engine.Terminal("report", "Report.", engine.ReportSchema), Orchestrate: engine.Parallel(engine.AgentSpec{Task: "a"})}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		last := f.raw[len(f.raw)-1]
		f.mu.Unlock()
		url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
		switch {
		case sees && (!strings.Contains(last, `"type":"image_url"`) || !strings.Contains(last, url) || !strings.Contains(last, `\"_images\":[{\"id\":\"image-1\"`)):
			t.Errorf("a seeing model's request after the result:\n%s", last)
		case !sees && (strings.Contains(last, "image_url") || !strings.Contains(last, "this model cannot see images")):
			t.Errorf("a blind model's request after the result:\n%s", last)
		}
	}
}
