package services

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lloyal-ai/lloyal/engine/serverbackend"
)

// server is a service a server runs, through the endpoints servers offer:
// /v1/rerank (llama-server, vLLM, hosted rerankers), /v1/embeddings, and a
// judge as a chat completion limited to its labels by a JSON schema.
type server struct {
	spec Spec
	ep   *serverbackend.Endpoint
}

// Dial is the service sp on its server (sp.Server). Nothing is sent until
// the first call.
func Dial(_ context.Context, sp Spec) (Service, error) {
	ep, err := serverbackend.NewEndpoint(sp.Server, serverbackend.EndpointOptions{
		Key:     sp.Key,
		URLFrom: fmt.Sprintf("service %s's server (services.%s.server in a harness)", sp.Name, sp.Name),
		KeyFrom: "$" + KeyPrefix + KeyName(sp.Name),
	})
	if err != nil {
		return nil, err
	}
	return &server{spec: sp, ep: ep}, nil
}

func (s *server) Spec() Spec    { return s.spec }
func (s *server) Where() string { return s.ep.Name() + " (" + s.spec.Model + ")" }
func (s *server) Close()        { s.ep.Close() }

// Identity is the server's URL and the model's name there.
func (s *server) Identity() string {
	return s.spec.Kind.String() + " " + s.ep.Name() + " " + s.spec.Model
}

// maxDocs bounds the documents one request carries: a server may refuse
// more, and progress moves between requests.
const maxDocs = 32

// Rank asks the server's /v1/rerank, maxDocs documents at a time.
func (s *server) Rank(ctx context.Context, query string, docs []string, progress func(done, total int)) ([]float64, error) {
	if s.spec.Kind != Rerank {
		return nil, fmt.Errorf("service %s is a %s service", s.spec.Name, s.spec.Kind)
	}
	scores := make([]float64, len(docs))
	for lo := 0; lo < len(docs); lo += maxDocs {
		hi := min(lo+maxDocs, len(docs))
		var ans struct {
			Results []struct {
				Index int      `json:"index"`
				Score *float64 `json:"relevance_score"`
			} `json:"results"`
		}
		req := map[string]any{"model": s.spec.Model, "query": query, "documents": docs[lo:hi], "top_n": hi - lo}
		if err := s.ep.Post(ctx, "/v1/rerank", req, &ans); err != nil {
			return nil, fmt.Errorf("service %s: %w", s.spec.Name, err)
		}
		got := make([]bool, hi-lo)
		for _, r := range ans.Results {
			if r.Index < 0 || r.Index >= hi-lo || got[r.Index] || r.Score == nil || math.IsNaN(*r.Score) {
				return nil, fmt.Errorf("service %s: %s answered a result for document %d that is not one it was sent (or twice, or without a relevance_score)", s.spec.Name, s.ep.Name(), r.Index)
			}
			got[r.Index] = true
			scores[lo+r.Index] = *r.Score
		}
		for i, ok := range got {
			if !ok {
				return nil, fmt.Errorf("service %s: %s scored %d of the %d documents it was sent (document %d has no score)", s.spec.Name, s.ep.Name(), len(ans.Results), hi-lo, lo+i)
			}
		}
		if progress != nil {
			progress(hi, len(docs))
		}
	}
	return scores, nil
}

// Embed asks the server's /v1/embeddings.
func (s *server) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if s.spec.Kind != Embed {
		return nil, fmt.Errorf("service %s is a %s service", s.spec.Name, s.spec.Kind)
	}
	out := make([][]float32, len(texts))
	for lo := 0; lo < len(texts); lo += maxDocs {
		hi := min(lo+maxDocs, len(texts))
		var ans struct {
			Data []struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if err := s.ep.Post(ctx, "/v1/embeddings", map[string]any{"model": s.spec.Model, "input": texts[lo:hi]}, &ans); err != nil {
			return nil, fmt.Errorf("service %s: %w", s.spec.Name, err)
		}
		for _, d := range ans.Data {
			if d.Index < 0 || d.Index >= hi-lo || out[lo+d.Index] != nil || len(d.Embedding) == 0 {
				return nil, fmt.Errorf("service %s: %s answered an embedding for input %d that is not one it was sent (or twice, or empty)", s.spec.Name, s.ep.Name(), d.Index)
			}
			out[lo+d.Index] = d.Embedding
		}
		for i := lo; i < hi; i++ {
			if out[i] == nil {
				return nil, fmt.Errorf("service %s: %s gave no embedding for input %d", s.spec.Name, s.ep.Name(), i)
			}
			if len(out[i]) != len(out[lo]) {
				return nil, fmt.Errorf("service %s: %s gave embeddings of different lengths (%d and %d)", s.spec.Name, s.ep.Name(), len(out[lo]), len(out[i]))
			}
		}
	}
	return out, nil
}

// Labels are the judge's answers.
func (s *server) Labels() []string { return s.spec.Labels }

// Judge asks the server's chat completions for one label, the answer held
// to the labels by a JSON schema, and reads the labels' probabilities
// from the log-probabilities of the answer's first token where the server
// gives them.
func (s *server) Judge(ctx context.Context, text string) (Verdict, error) {
	if s.spec.Kind != Judge {
		return Verdict{}, fmt.Errorf("service %s is a %s service", s.spec.Name, s.spec.Kind)
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string", "enum": s.spec.Labels}}, "required": []string{"label"}, "additionalProperties": false}
	req := map[string]any{
		"model":    s.spec.Model,
		"messages": []map[string]string{{"role": "system", "content": JudgeInstruction(s.spec)}, {"role": "user", "content": text}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "verdict", "strict": true, "schema": schema}},
		"temperature": 0, "max_tokens": judgeTokens, "logprobs": true, "top_logprobs": 20,
	}
	var ans struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			Logprobs *struct {
				Content []struct {
					Token string `json:"token"`
					Top   []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := s.ep.Post(ctx, "/v1/chat/completions", req, &ans); err != nil {
		return Verdict{}, fmt.Errorf("service %s: %w", s.spec.Name, err)
	}
	if len(ans.Choices) == 0 {
		return Verdict{}, fmt.Errorf("service %s: %s answered no choice", s.spec.Name, s.ep.Name())
	}
	ch := ans.Choices[0]
	var v struct {
		Label string `json:"label"`
	}
	if err := json.Unmarshal([]byte(ch.Message.Content), &v); err != nil || !slices.Contains(s.spec.Labels, v.Label) {
		return Verdict{}, fmt.Errorf("service %s: %s answered %q, not one of the labels %s as JSON: does it honour response_format json_schema?", s.spec.Name, s.ep.Name(), Clip(ch.Message.Content, 120), strings.Join(s.spec.Labels, ", "))
	}
	out := Verdict{Label: v.Label}
	if ch.Logprobs != nil {
		// The answer is {"label":"…"}: the label starts at the token after
		// the third quote. Its alternatives there are the labels' chances.
		// Only the turn's judgeTokens are read, quotes counted as they
		// come: a server may send any number of tokens.
		quotes, afterQuote := 0, false
		toks := ch.Logprobs.Content
		for _, tok := range toks[:min(len(toks), judgeTokens)] {
			if quotes == 3 && afterQuote {
				alts := map[string]float64{}
				for _, t := range tok.Top {
					// A log-probability is at most 0: a server's +Inf or
					// 1000 would make every label's share NaN.
					if t.Logprob <= 0 && !math.IsNaN(t.Logprob) {
						alts[t.Token] += math.Exp(t.Logprob)
					}
				}
				out.Probs = firstTokenProbs(s.spec.Labels, alts)
				if out.Probs[out.Label] == 0 {
					out.Probs = nil // they would contradict the label: none is better
				}
				break
			}
			quotes += strings.Count(tok.Token, `"`)
			if t := strings.TrimSpace(tok.Token); t != "" {
				afterQuote = strings.HasSuffix(t, `"`)
			}
		}
	}
	return out, nil
}

// judgeTokens is the most tokens a judge's answer is given (and read of).
const judgeTokens = 64

// firstTokenProbs gives each label the probability of the alternatives
// that begin it, renormalised over the labels; nil when an alternative
// begins more than one label (the first token does not tell them apart)
// or none begins any.
func firstTokenProbs(labels []string, alts map[string]float64) map[string]float64 {
	probs := map[string]float64{}
	var sum float64
	for tok, p := range alts {
		// A token may carry the string's closing quote (a whole label
		// and its end, `yes"`): the label is what precedes it.
		if l, _, ok := strings.Cut(tok, `"`); ok {
			tok = l
		}
		if tok == "" {
			continue
		}
		var hit []string
		for _, l := range labels {
			if strings.HasPrefix(l, tok) {
				hit = append(hit, l)
			}
		}
		if len(hit) > 1 {
			return nil
		}
		if len(hit) == 1 {
			probs[hit[0]] += p
			sum += p
		}
	}
	if sum == 0 {
		return nil
	}
	for _, l := range labels {
		probs[l] /= sum
	}
	return probs
}

// Clip is s cut to n bytes at a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// JudgeInstruction is what a judge is told: the spec's instruction, or
// the default, with its labels.
func JudgeInstruction(sp Spec) string {
	ins := sp.Instruction
	if ins == "" {
		ins = "Classify the text the user gives."
	}
	return ins + " Answer with exactly one of: " + strings.Join(sp.Labels, ", ") + "."
}

// RerankInstruction is what a reranker is asked of each passage.
func RerankInstruction(sp Spec) string {
	if sp.Instruction != "" {
		return sp.Instruction
	}
	return "Judge whether the document answers the query. Answer only \"yes\" or \"no\"."
}
