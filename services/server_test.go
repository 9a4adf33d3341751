package services

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeServer answers /v1/rerank, /v1/embeddings and /v1/chat/completions as
// llama-server and vLLM do, and keeps what it was sent.
type fakeServer struct {
	got  map[string]map[string]any
	auth []string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.got[r.URL.Path] = req
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/rerank":
		// Sorted by score, as servers answer: the index says which.
		var res []map[string]any
		docs, _ := req["documents"].([]any)
		for i := len(docs) - 1; i >= 0; i-- {
			res = append(res, map[string]any{"index": i, "relevance_score": float64(len(docs[i].(string)))})
		}
		json.NewEncoder(w).Encode(map[string]any{"results": res})
	case "/v1/embeddings":
		var data []map[string]any
		in, _ := req["input"].([]any)
		for i := len(in) - 1; i >= 0; i-- {
			data = append(data, map[string]any{"index": i, "embedding": []float64{float64(len(in[i].(string))), 1}})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	case "/v1/chat/completions":
		io.WriteString(w, `{"choices":[{"message":{"content":"{\"label\":\"relevant\"}"},"logprobs":{"content":[
			{"token":"{\"","top_logprobs":[]},{"token":"label","top_logprobs":[]},{"token":"\":\"","top_logprobs":[]},
			{"token":"rel","top_logprobs":[{"token":"rel","logprob":-0.2231},{"token":"ir","logprob":-1.8971},{"token":"zz","logprob":-3}]},
			{"token":"evant","top_logprobs":[]},{"token":"\"}","top_logprobs":[]}]}}]}`)
	default:
		http.NotFound(w, r)
	}
}

func TestServerServices(t *testing.T) {
	f := &fakeServer{got: map[string]map[string]any{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	set, err := Open(context.Background(), []Spec{
		{Name: "ranker", Kind: Rerank, Model: "bge-reranker", Server: srv.URL, Key: "k1"},
		{Name: "embedder", Kind: Embed, Model: "nomic", Server: srv.URL},
		{Name: "judge", Kind: Judge, Model: "qwen", Server: srv.URL, Labels: []string{"relevant", "irrelevant"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	ctx := context.Background()

	r, err := set.Ranker("ranker")
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]string, maxDocs+3) // two requests
	for i := range docs {
		docs[i] = strings.Repeat("x", i+1)
	}
	var told []int
	scores, err := r.Rank(ctx, "q?", docs, func(done, _ int) { told = append(told, done) })
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range scores {
		if s != float64(i+1) {
			t.Fatalf("document %d scored %v, want %d: the answer's index maps a score to its document", i, s, i+1)
		}
	}
	if len(told) != 2 || told[1] != len(docs) {
		t.Errorf("progress %v", told)
	}
	if q := f.got["/v1/rerank"]; q["model"] != "bge-reranker" || q["query"] != "q?" {
		t.Errorf("rerank request %v", q)
	}
	if f.auth[0] != "Bearer k1" {
		t.Errorf("the ranker's key was not sent: %q", f.auth[0])
	}

	e, err := set.Embedder("embedder")
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(ctx, []string{"a", "bbb"})
	if err != nil || len(vecs) != 2 || vecs[0][0] != 1 || vecs[1][0] != 3 {
		t.Fatalf("embeddings %v, %v", vecs, err)
	}
	if last := f.auth[len(f.auth)-1]; last != "" {
		t.Errorf("the embedder was sent another service's key: %q", last)
	}

	j, err := set.Judge("judge")
	if err != nil {
		t.Fatal(err)
	}
	v, err := j.Judge(ctx, "some text")
	if err != nil {
		t.Fatal(err)
	}
	if v.Label != "relevant" || math.Abs(v.Probs["relevant"]-0.8/(0.8+0.15)) > 1e-3 || math.Abs(v.Probs["relevant"]+v.Probs["irrelevant"]-1) > 1e-9 {
		t.Errorf("verdict %+v", v)
	}
	rf := f.got["/v1/chat/completions"]["response_format"].(map[string]any)
	enum := rf["json_schema"].(map[string]any)["schema"].(map[string]any)["properties"].(map[string]any)["label"].(map[string]any)["enum"]
	if b, _ := json.Marshal(enum); string(b) != `["relevant","irrelevant"]` {
		t.Errorf("the judge's answer is not held to its labels: %s", b)
	}

	if _, err := set.Ranker("judge"); err == nil || !strings.Contains(err.Error(), "judge service, not rerank") {
		t.Errorf("a judge used as a ranker: %v", err)
	}
	if _, err := set.Ranker("nope"); err == nil || !strings.Contains(err.Error(), "ranker") {
		t.Errorf("an unknown service: %v", err)
	}
}

// TestServerAnswersCheckedAndBounded: a server that scores a document it
// was not sent, leaves one out, or answers a page is an error naming it.
func TestServerAnswersCheckedAndBounded(t *testing.T) {
	for _, tc := range []struct{ name, body, ctype, want string }{
		{"missing", `{"results":[{"index":0,"relevance_score":1}]}`, "application/json", "scored 1 of the 2"},
		{"foreign", `{"results":[{"index":5,"relevance_score":1},{"index":0,"relevance_score":1}]}`, "application/json", "not one it was sent"},
		{"twice", `{"results":[{"index":0,"relevance_score":1},{"index":0,"relevance_score":2}]}`, "application/json", "not one it was sent"},
		{"page", `<html>login</html>`, "text/html", "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			set, err := Open(context.Background(), []Spec{{Name: "r", Kind: Rerank, Model: "m", Server: srv.URL}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			r, _ := set.Ranker("r")
			if _, err := r.Rank(context.Background(), "q", []string{"a", "b"}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestServerKeyStaysWithItsOrigin: a redirect to another origin is refused
// before anything (the key) is sent there.
func TestServerKeyStaysWithItsOrigin(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	set, err := Open(context.Background(), []Spec{{Name: "r", Kind: Rerank, Model: "m", Server: srv.URL, Key: "secret"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	r, _ := set.Ranker("r")
	if _, err := r.Rank(context.Background(), "q", []string{"a"}, nil); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Errorf("err %v", err)
	}
	if len(leaked) != 0 {
		t.Errorf("the other origin was sent %v", leaked)
	}
}

// TestServerErrorsNameTheService: what a service's server refuses or
// answers wrongly is told with where the user sets that service's URL
// and key (its harness entry, its key variable), not the chat server's
// --server and LLOYAL_API_KEY, which play no part in it.
func TestServerErrorsNameTheService(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"refused", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"bad key"}`, http.StatusUnauthorized)
		}, "check $LLOYAL_SERVICE_KEY_MY_RANKER"},
		{"page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>login</html>")
		}, "is service my-ranker's server (services.my-ranker.server in a harness) the API's URL"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/v1/rerank", http.StatusTemporaryRedirect)
		}, "give it as service my-ranker's server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			set, err := Open(context.Background(), []Spec{{Name: "my-ranker", Kind: Rerank, Model: "m", Server: srv.URL, Key: "k"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			r, _ := set.Ranker("my-ranker")
			_, err = r.Rank(context.Background(), "q", []string{"a"}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, "--server") || strings.Contains(msg, "LLOYAL_API_KEY") {
				t.Errorf("%q names the chat server's settings", msg)
			}
		})
	}
}

func TestSpecCheck(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{Kind: Rerank, Model: "m"}, "needs a name"},
		{Spec{Name: "x", Kind: "score", Model: "m"}, `kind "score": use rerank, embed, judge`},
		{Spec{Name: "x", Kind: Rerank}, "model:"},
		{Spec{Name: "x", Kind: Judge, Model: "m", Labels: []string{"a"}}, "at least two labels"},
		{Spec{Name: "x", Kind: Judge, Model: "m", Labels: []string{"a", "a"}}, "distinct"},
	} {
		if err := tc.s.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
}

// scripted is a Ranker whose one score is given.
type scripted struct {
	score float64
	err   error
}

func (s scripted) Rank(context.Context, string, []string, func(int, int)) ([]float64, error) {
	return []float64{s.score}, s.err
}

// TestScorer: a reranker's logit as the pool's 0-to-1 relevance: 0 at or
// below even odds and on a failure, rising towards 1.
func TestScorer(t *testing.T) {
	for _, tc := range []struct {
		r    scripted
		want float64
	}{
		{scripted{score: 0}, 0},
		{scripted{score: -3}, 0},
		{scripted{score: 2}, 2/(1+math.Exp(-2)) - 1},
		{scripted{score: 40}, 1},
		{scripted{score: 5, err: io.ErrUnexpectedEOF}, 0},
		{scripted{score: math.NaN()}, 0},
	} {
		if got := Scorer(tc.r, nil).Score("q", "text"); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("score %v (err %v): %v, want %v", tc.r.score, tc.r.err, got, tc.want)
		}
	}
	// A failed call is the fallback's to score.
	if got := Scorer(scripted{err: io.ErrUnexpectedEOF}, fixedScore(0.25)).Score("q", "text"); got != 0.25 {
		t.Errorf("a failed call with a fallback scored %v, want the fallback's 0.25", got)
	}
}

// fakeEmbedder is the Ranker of an embed service on a fake server that
// answers each text it is sent with vec(text); sent records each request's
// texts. The cache is the test's own.
func fakeEmbedder(t *testing.T, vec func(text string) []float64) (r Ranker, sent *[][]any) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	sent = &[][]any{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Input []any }
		json.NewDecoder(r.Body).Decode(&req)
		*sent = append(*sent, req.Input)
		var data []map[string]any
		for i, in := range req.Input {
			data = append(data, map[string]any{"index": i, "embedding": vec(in.(string))})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	set, err := Open(context.Background(), []Spec{{Name: "e", Kind: Embed, Model: "m", Server: srv.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	if r, err = set.Ranker("e"); err != nil {
		t.Fatal(err)
	}
	return r, sent
}

// TestEmbedServiceRanks: an embed service ranks by cosine with the
// query's embedding, and a passage is embedded once: the next call finds
// its vector on disk and sends only the query.
func TestEmbedServiceRanks(t *testing.T) {
	// "q" points along x; a passage leans as far from it as it is long.
	r, inputs := fakeEmbedder(t, func(text string) []float64 { return []float64{1, float64(len(text)) - 1} })
	docs := []string{"aaaa", "b", "cc"}
	for round := range 2 {
		scores, err := r.Rank(context.Background(), "q", docs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			n := float64(len(d))
			if want := 1 / math.Sqrt(1+(n-1)*(n-1)); math.Abs(scores[i]-want) > 1e-6 {
				t.Errorf("round %d: %q scored %v, want %v", round, d, scores[i], want)
			}
		}
	}
	if len(*inputs) != 2 || len((*inputs)[0]) != 4 || len((*inputs)[1]) != 1 || (*inputs)[1][0] != "q" {
		t.Errorf("sent %v: the passages' vectors were not kept", *inputs)
	}
}

// A passage's cached vector of another length than the query's (the
// server's model changed under its name) is embedded again and cached
// anew: it failed every later ranking until the cache was cleared.
func TestAStaleCachedVectorIsEmbeddedAgain(t *testing.T) {
	dims := 3
	r, _ := fakeEmbedder(t, func(string) []float64 {
		v := make([]float64, dims)
		v[0] = 1
		return v
	})
	for _, d := range []int{3, 2, 2} {
		dims = d
		if s, err := r.Rank(context.Background(), "q", []string{"a"}, nil); err != nil || s[0] != 1 {
			t.Fatalf("%d dimensions: %v, %v", d, s, err)
		}
	}
}

// A FIFO where a passage's cached vector would be is not read (the run
// hung on it): the passage is embedded as if nothing were cached.
func TestACachedVectorIsReadOnlyFromARegularFile(t *testing.T) {
	r, _ := fakeEmbedder(t, func(string) []float64 { return []float64{1, 0} })
	er := r.(*embedRanker)
	if err := os.MkdirAll(er.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(er.file("a"), 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := r.Rank(context.Background(), "q", []string{"a"}, nil)
		if err == nil && s[0] != 1 {
			err = fmt.Errorf("scored %v, want 1", s)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ranking read a FIFO in the embeddings cache and hung")
	}
}

type fixedScore float64

func (f fixedScore) Score(string, string) float64 { return float64(f) }

// TestFirstTokenProbs: the labels' chances from the first token's
// alternatives, a token that ends the string too read as its label.
func TestFirstTokenProbs(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		alts   map[string]float64
		want   map[string]float64
	}{
		{[]string{"yes", "no"}, map[string]float64{`yes"`: 0.9, "no": 0.1}, map[string]float64{"yes": 0.9, "no": 0.1}},
		{[]string{"relevant", "irrelevant"}, map[string]float64{"rel": 0.6, "ir": 0.2, "zz": 0.2}, map[string]float64{"relevant": 0.75, "irrelevant": 0.25}},
		{[]string{"a1", "a2"}, map[string]float64{"a": 1}, nil},      // the first token tells them not apart
		{[]string{"yes", "no"}, map[string]float64{"maybe": 1}, nil}, // no alternative begins a label
	} {
		got := firstTokenProbs(tc.labels, tc.alts)
		if (got == nil) != (tc.want == nil) {
			t.Errorf("%v: %v, want %v", tc.alts, got, tc.want)
			continue
		}
		for k, w := range tc.want {
			if math.Abs(got[k]-w) > 1e-9 {
				t.Errorf("%v: %s %v, want %v", tc.alts, k, got[k], w)
			}
		}
	}
}

// A served service's key goes only to a server the person names for it
// ($LLOYAL_SERVICE_SERVER_NAME, which replaces the harness file's): a
// harness file from elsewhere that names a service like one of the
// person's, at its own server, is sent no key, and lloyal says so.
func TestKeysGoOnlyToTheServersThePersonNames(t *testing.T) {
	env := []string{"LLOYAL_SERVICE_KEY_RANKER=k-r", "LLOYAL_SERVICE_KEY_JUDGE=k-j", "LLOYAL_SERVICE_SERVER_JUDGE=https://judge.example/v1"}
	specs := []Spec{
		{Name: "ranker", Kind: Rerank, Model: "m", Server: "https://evil.example"},
		{Name: "judge", Kind: Judge, Model: "m", Server: "https://elsewhere.example", Labels: []string{"a", "b"}},
		{Name: "embedder", Kind: Embed, Model: "m.gguf"},
	}
	var note strings.Builder
	Bind(specs, KeysFrom(env), ServersFrom(env), &note)
	if specs[0].Key != "" || specs[0].Server != "https://evil.example" {
		t.Errorf("ranker: %+v: its key went to the harness file's server", specs[0])
	}
	if !strings.Contains(note.String(), "LLOYAL_SERVICE_SERVER_RANKER=https://evil.example") {
		t.Errorf("the withheld key was not said: %q", note.String())
	}
	if specs[1].Key != "k-j" || specs[1].Server != "https://judge.example/v1" {
		t.Errorf("judge: %+v: want the person's server and key", specs[1])
	}
	if specs[2].Key != "" || specs[2].Server != "" {
		t.Errorf("a local service: %+v", specs[2])
	}
}

func TestKeysFromTheEnvironment(t *testing.T) {
	keys := KeysFrom([]string{"LLOYAL_SERVICE_KEY_MY_RANKER=k1", "LLOYAL_SERVICE_KEY_=x", "LLOYAL_SERVICE_KEY_EMPTY=", "OTHER=y", "LLOYAL_API_KEY=z"})
	if len(keys) != 1 || keys[KeyName("my-ranker")] != "k1" || KeyName("Judge.2") != "JUDGE_2" {
		t.Errorf("keys %v, KeyName %q", keys, KeyName("Judge.2"))
	}
}

// judgeVerdict is a judge service's verdict on a fake server that answers
// "relevant" with the log-probabilities of tokens (JSON objects, joined).
func judgeVerdict(t *testing.T, tokens ...string) (Verdict, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"{\"label\":\"relevant\"}"},"logprobs":{"content":[`+strings.Join(tokens, ",")+`]}}]}`)
	}))
	defer srv.Close()
	set, err := Open(context.Background(), []Spec{{Name: "j", Kind: Judge, Model: "m", Server: srv.URL, Labels: []string{"relevant", "irrelevant"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	j, _ := set.Judge("j")
	return j.Judge(context.Background(), "text")
}

// labelOpens are the tokens of {"label":" before the label's.
var labelOpens = []string{`{"token":"{\"","top_logprobs":[]}`, `{"token":"label","top_logprobs":[]}`, `{"token":"\":\"","top_logprobs":[]}`}

// A judge's answer is read for its turn's judgeTokens alone: a server
// that sends more (here the label's alternatives only after 70 filler
// tokens) gives a verdict without probabilities, not a scan of all it
// sent.
func TestJudgeReadsItsTurnsTokensOnly(t *testing.T) {
	var toks []string
	for range 70 {
		toks = append(toks, `{"token":" ","top_logprobs":[]}`)
	}
	toks = append(append(toks, labelOpens...), `{"token":"rel","top_logprobs":[{"token":"rel","logprob":-0.2},{"token":"ir","logprob":-1.9}]}`)
	v, err := judgeVerdict(t, toks...)
	if err != nil || v.Label != "relevant" || v.Probs != nil {
		t.Fatalf("verdict %+v, %v: want the label, without probabilities", v, err)
	}
}

// A server's log-probabilities above 0 (1000, which e to the power of is
// +Inf) are not probabilities: left out, the verdict's are finite, where
// they were NaN and failed the best-of step that recorded them.
func TestJudgesProbabilitiesAreFinite(t *testing.T) {
	v, err := judgeVerdict(t, append(labelOpens[:3:3], `{"token":"rel","top_logprobs":[{"token":"rel","logprob":-0.2},{"token":"ir","logprob":1000},{"token":"relev","logprob":1000}]}`)...)
	if err != nil || v.Label != "relevant" {
		t.Fatalf("verdict %+v, %v", v, err)
	}
	for l, p := range v.Probs {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			t.Fatalf("%s's probability %v (verdict %+v)", l, p, v)
		}
	}
	if v.Probs["relevant"] != 1 {
		t.Fatalf("probabilities %v: want relevant's alone, 1", v.Probs)
	}
}
