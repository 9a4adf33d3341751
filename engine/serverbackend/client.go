// Package serverbackend runs lloyal's agents on an inference server: an
// engine.TurnBackend that sends each agent's whole conversation, rendered by
// lloyal, as a raw-prompt completion and streams the answer back.
//
// Two wire dialects are spoken. An ollama server (it answers /api/version)
// gets /api/generate with raw: true, which takes a raw prompt, a JSON Schema
// for forced calls and the context size per request. Any other server gets
// the OpenAI-compatible /v1/completions (vLLM, SGLang, llama-server), with
// usage in the last streamed chunk.
//
// Because lloyal renders the prompt, every agent's prompt starts with the
// same bytes (the spine: system prompt and tool schemas), which is what a
// server's prefix cache (vLLM's automatic prefix caching, SGLang's
// RadixAttention, llama-server's and ollama's prompt caches) reuses.
//
// Faults are answers, not crashes: 429 and 503 are engine.Retry errors
// (Retry-After honoured) and the runtime parks the agent; a refused
// connection, a stream cut short, a server that sends nothing for
// RequestTimeout or keeps a turn going past TurnTimeout is an error that
// ends the agent concerned. A server's answer is never authority: a
// redirect to another origin is refused (credentials stay with the server
// the user named), and a turn ends at its token limit and within bounded
// memory whatever the server streams. The package is pure Go (it builds
// with CGO_ENABLED=0).
package serverbackend

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/internal/capped"
)

// Dialect is the wire protocol a server speaks.
type Dialect string

// Dialects.
const (
	Ollama Dialect = "ollama" // /api/generate, raw prompts
	OpenAI Dialect = "openai" // /v1/completions, raw prompts
	Chat   Dialect = "chat"   // /v1/chat/completions, messages and tools
)

// ollamaChatCtx is ollama's default context on a machine without a GPU:
// what its chat endpoint is taken to run when the server does not say.
const ollamaChatCtx = 4096

// Dialects by the name --api takes.
var apis = map[string]Dialect{"generate": Ollama, "completions": OpenAI, "chat": Chat}

// ParseAPI reads --api: auto (""), generate, completions or chat.
func ParseAPI(s string) (Dialect, error) {
	if s == "" || s == "auto" {
		return "", nil
	}
	if d, ok := apis[s]; ok {
		return d, nil
	}
	return "", fmt.Errorf("--api %q: use auto, chat (/v1/chat/completions), completions (/v1/completions) or generate (ollama's /api/generate)", s)
}

// Options configure a Client.
type Options struct {
	// URL is the server's base URL (http://host:port, no path).
	URL string
	// Model is the model's name on the server.
	Model string
	// APIKey is sent as a bearer token (never logged or traced).
	APIKey string
	// NCtx is the context one request may fill. 0 asks the server (ollama's
	// model info, vLLM's max_model_len, llama-server's n_ctx); with ollama,
	// whose context is set per request, it is also what is asked for.
	NCtx int
	// RequestTimeout aborts a request when the server has sent nothing for
	// this long (default 60s): a server that stops answering ends the agent,
	// it never hangs the run.
	RequestTimeout time.Duration
	// TurnTimeout ends a turn that has not finished after this long, however
	// the server streams: keep-alives and a trickle of bytes, which reset
	// RequestTimeout, do not extend it (default DefaultTurnTimeout).
	TurnTimeout time.Duration
	// Format overrides the chat format the prompts are rendered in (default:
	// detected from the model's template or vocabulary).
	Format chat.Kind
	// API picks the dialect (--api); "" detects it: ollama's raw
	// /api/generate on an ollama server, else /v1/completions, or
	// /v1/chat/completions where the server has no raw completions.
	API Dialect
	// Headers are sent with every request (a gateway's keys, an
	// organisation); like APIKey, never logged or traced.
	Headers map[string]string
}

// DefaultTurnTimeout is Options.TurnTimeout's default (--turn-timeout):
// generous, since a slow server writes a long turn slowly, and still a
// bound on a server that never finishes one.
const DefaultTurnTimeout = 10 * time.Minute

// ParseHeaders reads LLOYAL_HEADERS: "Name: value" pairs, one per line or
// separated by ";".
func ParseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ';' }) {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, v, ok := strings.Cut(f, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("LLOYAL_HEADERS: %q is not a header: write Name: value, several separated by ; or new lines", chat.Clip(f, 40))
		}
		out[http.CanonicalHeaderKey(k)] = v
	}
	return out, nil
}

// Client is a turn-level backend on one model of one server. It is safe for
// concurrent use; Close releases its connections.
type Client struct {
	o       Options
	base    *url.URL
	dialect Dialect
	format  chat.Format
	nctx    int
	tr      *http.Transport
	hc      *http.Client

	// ollama: the server is ollama (whose chat endpoint ignores
	// tool_choice: a forced call is constrained by response_format).
	ollama bool
	// vision: the server says its model sees images (ollama's
	// capabilities, llama-server's /props), and it is spoken to in chat
	// messages, which carry them (CanSee).
	vision bool
	// note says how the context was chosen when it is not what was asked
	// for (Note).
	note string

	mu    sync.Mutex
	usage Usage
}

// Note says how the client's context differs from the one asked for (a
// server whose context is smaller than --ctx), or "".
func (c *Client) Note() string { return c.note }

// Usage sums what the server reported over a client's requests.
type Usage struct {
	Requests     int
	PromptTokens int
	Tokens       int
	// Evaluated sums the prompt tokens the server says it really computed;
	// EvaluatedKnown counts the requests that said.
	Evaluated, EvaluatedKnown int
	// PromptTime sums the server's own prompt-processing time, where it
	// reports one (ollama's prompt_eval_duration).
	PromptTime time.Duration
}

// Dial checks the server, the model and its context size, and picks the
// dialect. It fails with what to fix when the server is unreachable or does
// not have the model.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.URL == "" {
		return nil, errors.New("server: no URL (use --server http://host:port or LLOYAL_SERVER)")
	}
	base, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("server %q: not an http(s) URL; use e.g. http://127.0.0.1:11434", o.URL)
	}
	if o.Model == "" {
		return nil, fmt.Errorf("server %s: no model named; pass --model NAME (a model the server has)", redact(base))
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 60 * time.Second
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = DefaultTurnTimeout
	}
	tr := &http.Transport{
		Proxy:               nil, // a local inference server: never through a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	c := &Client{o: o, base: base, tr: tr}
	c.hc = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	if err := c.probe(ctx); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

// Close releases the client's idle connections. Requests in flight are the
// runtime's to cancel.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// Format is the chat format prompts are rendered in.
func (c *Client) Format() chat.Format { return c.format }

// NCtx is the context one request may fill.
func (c *Client) NCtx() int { return c.nctx }

// Dialect is the protocol the server speaks.
func (c *Client) Dialect() Dialect { return c.dialect }

// Name is the server's URL without credentials, for headers and titles.
func (c *Client) Name() string { return redact(c.base) }

// Model is the model's name on the server.
func (c *Client) Model() string { return c.o.Model }

// Usage is what the server reported so far.
func (c *Client) Usage() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usage
}

func redact(u *url.URL) string {
	v := *u
	v.User = nil
	v.RawQuery = ""
	return v.String()
}

// probe finds the dialect, checks the model and reads the context size and
// template.
func (c *Client) probe(ctx context.Context) error {
	var ver struct {
		Version string `json:"version"`
	}
	err := c.getJSON(ctx, "/api/version", nil, &ver)
	var re *redirectError
	switch {
	case isUnreachable(err) || errors.Is(err, engine.ErrRefused) || errors.As(err, &re):
		return err
	case err == nil && ver.Version != "":
		c.ollama = true
		c.dialect = cmp.Or(c.o.API, Ollama)
		if err := c.probeOllama(ctx); err != nil {
			return err
		}
	default:
		if c.o.API == Ollama {
			return fmt.Errorf("server %s is not ollama (it does not answer /api/version): use --api chat or completions", c.Name())
		}
		if err := c.probeOpenAI(ctx); err != nil {
			return err
		}
		c.dialect = c.o.API
		if c.dialect == "" {
			c.dialect = c.detectOpenAI(ctx)
		}
	}
	if c.dialect == Chat {
		// The server renders its model's own template: lloyal sends
		// messages, in a format whose markers only it reads.
		c.format = chat.FormatOf(chat.API)
		if !c.ollama {
			// llama-server says what its model reads; another server
			// that does not is taken not to see.
			var props struct {
				Modalities struct {
					Vision bool `json:"vision"`
				} `json:"modalities"`
			}
			if c.getJSON(ctx, "/props", nil, &props) == nil {
				c.vision = props.Modalities.Vision
			}
		}
	} else {
		c.vision = false // a raw prompt carries no image
	}
	return nil
}

// CanSee reports whether the server's model sees images and lloyal speaks
// to it in chat messages, which carry them (engine.Seer).
func (c *Client) CanSee() bool { return c.vision }

// detectOpenAI asks /v1/completions for one token of a raw prompt: a
// server without it (404, 405) or that refuses raw prompts for this model
// (a chat model: 400) is spoken to in messages.
func (c *Client) detectOpenAI(ctx context.Context) Dialect {
	var out struct{} // only whether it answers
	err := c.getJSON(ctx, "/v1/completions", map[string]any{"model": c.o.Model, "prompt": "Hello", "max_tokens": 1}, &out)
	var se *statusErr
	if errors.As(err, &se) && (se.code == http.StatusNotFound || se.code == http.StatusMethodNotAllowed || se.code == http.StatusBadRequest) {
		return Chat
	}
	return OpenAI
}

func (c *Client) probeOllama(ctx context.Context) error {
	var show struct {
		Template     string                     `json:"template"`
		ModelInfo    map[string]json.RawMessage `json:"model_info"`
		Capabilities []string                   `json:"capabilities"`
	}
	if err := c.getJSONUpTo(ctx, "/api/show", map[string]any{"model": c.o.Model, "verbose": true}, &show, showBytes); err != nil {
		return fmt.Errorf("server %s has no model %q (%w); pull or create it there first (ollama pull NAME)", c.Name(), c.o.Model, err)
	}
	c.vision = slices.Contains(show.Capabilities, "vision")
	trained := 0
	var vocab []string
	for k, v := range show.ModelInfo {
		if strings.HasSuffix(k, ".context_length") {
			var f float64
			if json.Unmarshal(v, &f) == nil {
				trained = int(min(max(f, 0), math.MaxInt32))
			}
		}
		if k == "tokenizer.ggml.tokens" {
			_ = json.Unmarshal(v, &vocab)
		}
	}
	c.nctx = c.o.NCtx
	if c.nctx == 0 {
		c.nctx = min(max(trained, 0), 8192)
	}
	if trained > 0 && c.nctx > trained {
		c.nctx = trained
		c.note = fmt.Sprintf("the model was trained on %d tokens of context: lloyal plans for %d, not the %d asked for", trained, trained, c.o.NCtx)
	}
	if c.o.API == Chat {
		// ollama's chat endpoint takes no context size: the server's own
		// default applies (OLLAMA_CONTEXT_LENGTH, else 4k to 256k by its
		// memory). The model is loaded as a chat request would load it,
		// and the server says the context it got.
		served := c.ollamaChatContext(ctx)
		if served <= 0 {
			served = ollamaChatCtx
		}
		if served < c.nctx {
			c.note = fmt.Sprintf("ollama's chat endpoint runs %s with a context of %d tokens, less than the %d asked for: lloyal plans for %d (start ollama with a larger OLLAMA_CONTEXT_LENGTH for more)", c.o.Model, served, c.nctx, served)
			c.nctx = served
		}
	}
	if c.nctx <= 0 {
		return fmt.Errorf("server %s: model %q does not say its context size; pass --ctx", c.Name(), c.o.Model)
	}
	c.format = c.pickFormat(show.Template, vocab)
	return nil
}

// ollamaChatContext loads the model with the server's default options (as
// its chat endpoint does) and reads the context it was given (/api/ps); 0
// when the server does not say.
func (c *Client) ollamaChatContext(ctx context.Context) int {
	var loaded struct{} // only that it loaded
	if err := c.getJSON(ctx, "/api/generate", map[string]any{"model": c.o.Model, "stream": false}, &loaded); err != nil {
		return 0
	}
	var ps struct {
		Models []struct {
			Name          string `json:"name"`
			Model         string `json:"model"`
			ContextLength int    `json:"context_length"`
		} `json:"models"`
	}
	if err := c.getJSON(ctx, "/api/ps", nil, &ps); err != nil {
		return 0
	}
	for _, m := range ps.Models {
		if m.Name == c.o.Model || m.Model == c.o.Model || strings.TrimSuffix(m.Name, ":latest") == c.o.Model {
			return m.ContextLength
		}
	}
	return 0
}

func (c *Client) probeOpenAI(ctx context.Context) error {
	// The list is read one model at a time: a hosted server lists
	// hundreds, and a hostile one millions of empty objects.
	var models struct {
		Data json.RawMessage `json:"data"`
	}
	if err := c.getJSONUpTo(ctx, "/v1/models", nil, &models, modelsBytes); err != nil {
		var he *htmlError
		if errors.As(err, &he) {
			return fmt.Errorf("server %s: /v1/models: %w", c.Name(), err)
		}
		return fmt.Errorf("server %s: /v1/models: %w; is it an OpenAI-compatible server?", c.Name(), err)
	}
	found, listed := false, 0
	var names []string
	err := eachModel(models.Data, func(m servedModel) {
		if listed++; listed <= maxNamesSaid {
			names = append(names, m.ID)
		}
		if m.ID != c.o.Model {
			return
		}
		found = true
		for _, n := range []int{m.MaxModelLen, m.ContextLength, m.Meta.NCtxTrain} {
			if c.nctx == 0 && n > 0 {
				c.nctx = n
			}
		}
	})
	if err != nil {
		return fmt.Errorf("server %s: /v1/models: %w; is it an OpenAI-compatible server?", c.Name(), err)
	}
	if !found {
		if listed > len(names) {
			names = append(names, fmt.Sprintf("and %d more", listed-len(names)))
		}
		return fmt.Errorf("server %s has no model %q; it has: %s", c.Name(), c.o.Model, strings.Join(names, ", "))
	}
	// llama-server says its real context (n_ctx, per slot) and template.
	var props struct {
		ChatTemplate string `json:"chat_template"`
		Settings     struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	_ = c.getJSON(ctx, "/props", nil, &props)
	if props.Settings.NCtx > 0 {
		c.nctx = props.Settings.NCtx
	}
	switch {
	case c.o.NCtx > 0 && (c.nctx == 0 || c.o.NCtx < c.nctx):
		c.nctx = c.o.NCtx // a smaller context than the server's is the user's to choose
	case c.o.NCtx > c.nctx && c.nctx > 0:
		c.note = fmt.Sprintf("the server's context is %d tokens, smaller than the %d asked for: lloyal plans for %d", c.nctx, c.o.NCtx, c.nctx)
	}
	if c.nctx <= 0 {
		return fmt.Errorf("server %s: model %q does not say its context size; pass --ctx", c.Name(), c.o.Model)
	}
	c.format = c.pickFormat(props.ChatTemplate, nil)
	return nil
}

// pickFormat: the override, else the template's family, else the family
// whose markers the vocabulary holds, else the generic labels.
func (c *Client) pickFormat(template string, vocab []string) chat.Format {
	if c.o.Format != "" {
		return chat.FormatOf(c.o.Format)
	}
	if f := chat.Detect(template); f.Kind != chat.Generic {
		return f
	}
	has := map[string]bool{}
	for _, t := range vocab {
		if strings.HasPrefix(t, "<|") {
			has[t] = true
		}
	}
	for _, k := range []chat.Kind{chat.ChatML, chat.Llama3, chat.Phi3} {
		f := chat.FormatOf(k)
		all := len(vocab) > 0
		for _, m := range f.Required {
			all = all && has[m]
		}
		if all {
			return f
		}
	}
	return chat.FormatOf(chat.Generic)
}

// isUnreachable reports whether err says nothing is listening (so probing
// another dialect is pointless).
func isUnreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func (c *Client) newRequest(ctx context.Context, path string, body any) (*http.Request, error) {
	method := http.MethodGet
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		method, r = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.o.Headers {
		req.Header.Set(k, v)
	}
	if c.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	return req, nil
}

// Bounds on a probe's answer: JSON decoded into maps and slices costs up
// to fifty times its bytes, so an answer is read only to what its probe
// can need. /api/show carries the model's whole vocabulary.
const (
	probeBytes = 1 << 20
	showBytes  = 64 << 20
)

// modelsBytes bounds /v1/models' answer, read one model at a time;
// maxNamesSaid bounds the names an error lists.
const (
	modelsBytes  = 16 << 20
	maxNamesSaid = 20
)

// servedModel is one entry of /v1/models.
type servedModel struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"` // vLLM
	Meta        struct {
		NCtxTrain int `json:"n_ctx_train"`
	} `json:"meta"` // llama-server
	ContextLength int `json:"context_length"`
}

// eachModel calls f with each model of a /v1/models data array, decoded
// one at a time (none: a missing or null list).
func eachModel(data json.RawMessage, f func(servedModel)) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("its data is not a list")
	}
	for dec.More() {
		var m servedModel
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("a model in its data: %w", err)
		}
		f(m)
	}
	return nil
}

// getJSON makes a short request (probing) and decodes its answer, of at
// most probeBytes.
func (c *Client) getJSON(ctx context.Context, path string, body, out any) error {
	return c.getJSONUpTo(ctx, path, body, out, probeBytes)
}

// getJSONUpTo is getJSON with an answer of at most limit bytes.
func (c *Client) getJSONUpTo(ctx context.Context, path string, body, out any, limit int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.requestFailed(err)
	}
	defer resp.Body.Close()
	if err := answered(resp, chatHints()); err != nil {
		return err
	}
	over := fmt.Errorf("the answer to %s is longer than lloyal reads of it", path)
	return json.NewDecoder(capped.Reader(resp.Body, limit, over)).Decode(out)
}

// requestFailed says why a request got no answer (unreached).
func (c *Client) requestFailed(err error) error { return unreached(c.Name(), err) }

// unreached says why a request to the server named got no answer: a
// redirect lloyal refused (its own message), or a server it cannot reach.
func unreached(name string, err error) error {
	var re *redirectError
	if errors.As(err, &re) {
		return re
	}
	return fmt.Errorf("cannot reach the server at %s: %w", name, err)
}

// answered fails unless resp is an answer to read: a refusal is the
// server's own message (statusError), a web page where JSON belongs says
// what to check (notHTML).
func answered(resp *http.Response, h hints) error {
	if resp.StatusCode != http.StatusOK {
		return statusError(resp, h)
	}
	return notHTML(resp, h)
}

// hints name where the user gives a server's URL and its credentials, for
// the messages that say what to check: the chat server's flag and
// variables, or a service's harness entry and key variable.
type hints struct{ url, key string }

// chatHints are the chat server's: lloyal run's flag and variables.
func chatHints() hints { return hints{url: "--server", key: "LLOYAL_API_KEY and LLOYAL_HEADERS"} }

// isStream reports whether an answer says it is a stream of a turn
// (server-sent events, or ollama's lines of JSON).
func isStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream" || mt == "application/x-ndjson"
}

// htmlError is a page where the API's answer should be: a proxy's error
// page, a login page, a web UI at the URL given.
type htmlError struct{ msg string }

func (e *htmlError) Error() string { return e.msg }

// notHTML fails when the server answered a web page, saying what to check,
// instead of the parse error (or "unexpected EOF") reading it would give.
func notHTML(resp *http.Response, h hints) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "text/html" && mt != "application/xhtml+xml" {
		return nil
	}
	return &htmlError{fmt.Sprintf("the server answered %s with %s, not JSON: is %s the API's URL (e.g. http://127.0.0.1:11434, without a path), and is nothing (a proxy, a login) in between?", resp.Status, mt, h.url)}
}

// statusError reads a refusal: 429 and 503 are transient (engine.Retry, with
// the server's Retry-After), anything else is the server's message.
func statusError(resp *http.Response, h hints) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if he := notHTML(resp, h); he != nil {
		// A page, not the API's error: its markup says nothing useful.
		msg = he.Error()
	}
	var e struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		switch v := e.Error.(type) {
		case string:
			msg = v
		case map[string]any:
			if m, ok := v["message"].(string); ok {
				msg = m
			}
		}
	}
	err := &statusErr{code: resp.StatusCode, msg: fmt.Sprintf("the server answered %s: %s", resp.Status, msg)}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return engine.Retry(retryAfter(resp.Header.Get("Retry-After")), err)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (%s): check %s", engine.ErrRefused, err.msg, h.key)
	}
	return err
}

// statusErr is a server's refusal: its status code and message.
type statusErr struct {
	code int
	msg  string
}

func (e *statusErr) Error() string { return e.msg }

// retryAfter reads Retry-After (seconds or an HTTP date); 1s without one.
func retryAfter(v string) time.Duration {
	if v == "" {
		return time.Second
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return time.Second
}

// Generate sends one turn and streams its answer.
func (c *Client) Generate(ctx context.Context, tr engine.TurnRequest, text func(string)) (engine.TurnResult, error) {
	path, body, err := c.body(tr)
	if err != nil {
		return engine.TurnResult{}, err
	}
	// The turn's wall limit: nothing the server sends extends it.
	ctx, stop := context.WithTimeoutCause(ctx, c.o.TurnTimeout,
		fmt.Errorf("the turn was not over after %s (--turn-timeout): the server kept it going without finishing it; raise --turn-timeout for a slow server", c.o.TurnTimeout))
	defer stop()
	// The watchdog: every byte from the server resets it; silence for
	// RequestTimeout cancels the request.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	silent := fmt.Errorf("the server sent nothing for %s (--request-timeout)", c.o.RequestTimeout)
	dog := time.AfterFunc(c.o.RequestTimeout, func() { cancel(silent) })
	defer dog.Stop()
	req, err := c.newRequest(ctx, path, body)
	if err != nil {
		return engine.TurnResult{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return engine.TurnResult{}, cause // silent, or past --turn-timeout
		}
		if ctx.Err() != nil {
			return engine.TurnResult{}, ctx.Err()
		}
		return engine.TurnResult{}, c.requestFailed(err)
	}
	defer resp.Body.Close()
	if err := answered(resp, chatHints()); err != nil {
		return engine.TurnResult{}, err
	}
	r := &watchReader{r: resp.Body, dog: dog, d: c.o.RequestTimeout}
	b := newTurnBudget(tr.MaxTokens)
	var res engine.TurnResult
	var pieces int
	switch c.dialect {
	case Ollama:
		res, pieces, err = c.readOllama(r, b, text)
	case Chat:
		res, pieces, err = c.readChat(r, b, text)
	default:
		res, pieces, err = c.readOpenAI(r, b, text)
	}
	if err != nil {
		switch cause := context.Cause(ctx); {
		case cause != nil && !errors.Is(cause, context.Canceled):
			err = cause
		case ctx.Err() != nil:
			err = ctx.Err()
		case errors.Is(err, bufio.ErrTooLong):
			err = fmt.Errorf("the stream from %s holds a line longer than %d bytes, more than a turn of %d tokens may bring", c.Name(), b.maxLine(), tr.MaxTokens)
		case pieces == 0 && errors.Is(err, io.ErrUnexpectedEOF) && !isStream(resp):
			err = fmt.Errorf("the answer from %s (%s) held no stream of a turn: is --server the API's URL?", c.Name(), cmp.Or(resp.Header.Get("Content-Type"), "no Content-Type"))
		default:
			err = fmt.Errorf("the stream from %s was cut after %d pieces: %w", c.Name(), pieces, err)
		}
		return res, err
	}
	c.mu.Lock()
	c.usage.Requests++
	c.usage.PromptTokens += res.PromptTokens
	c.usage.Tokens += res.Tokens
	if res.Evaluated >= 0 {
		c.usage.Evaluated += res.Evaluated
		c.usage.EvaluatedKnown++
	}
	c.mu.Unlock()
	return res, nil
}

// watchReader resets the watchdog on every read that brings bytes.
type watchReader struct {
	r   io.Reader
	dog *time.Timer
	d   time.Duration
}

func (w *watchReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.dog.Reset(w.d)
	}
	return n, err
}

// defaultRepeatLastN is the penalty window when the sampling names none:
// llama.cpp's, llama-server's and ollama's default.
const defaultRepeatLastN = 64

// repeatPenalty is the sampling's repetition penalty as the servers take it:
// 1 when off (0 means off in engine.Sampling), and the window it looks at.
func repeatPenalty(s engine.Sampling) (float32, int) {
	p, n := s.RepeatPenalty, s.RepeatLastN
	if p <= 0 {
		p = 1
	}
	if n <= 0 {
		n = defaultRepeatLastN
	}
	return p, n
}

// body is the request for the dialect.
func (c *Client) body(tr engine.TurnRequest) (string, map[string]any, error) {
	s := tr.Sampling
	if c.dialect == Chat {
		return c.chatBody(tr)
	}
	if c.dialect == Ollama {
		opts := map[string]any{"num_ctx": c.nctx, "num_predict": tr.MaxTokens, "temperature": s.Temperature, "seed": s.Seed}
		if s.TopK > 0 {
			opts["top_k"] = s.TopK
		}
		if s.TopP > 0 {
			opts["top_p"] = s.TopP
		}
		if s.MinP > 0 {
			opts["min_p"] = s.MinP
		}
		// Always, unlike the others: ollama's own default is a penalty of
		// 1.1, and the run must sample as its trace header says it did.
		opts["repeat_penalty"], opts["repeat_last_n"] = repeatPenalty(s)
		if len(tr.Stops) > 0 {
			opts["stop"] = tr.Stops
		}
		b := map[string]any{"model": c.o.Model, "prompt": tr.Prompt, "raw": true, "stream": true, "options": opts}
		if len(tr.Call) > 0 {
			b["format"] = json.RawMessage(tr.Call)
		}
		return "/api/generate", b, nil
	}
	b := map[string]any{"model": c.o.Model, "prompt": tr.Prompt, "stream": true, "max_tokens": tr.MaxTokens,
		"temperature": s.Temperature, "seed": s.Seed, "stream_options": map[string]any{"include_usage": true}}
	if s.TopK > 0 {
		b["top_k"] = s.TopK // vLLM, SGLang, llama-server extensions
	}
	if s.TopP > 0 {
		b["top_p"] = s.TopP
	}
	if s.MinP > 0 {
		b["min_p"] = s.MinP
	}
	if p, n := repeatPenalty(s); p != 1 {
		b["repeat_penalty"], b["repeat_last_n"] = p, n // llama-server
		b["repetition_penalty"] = p                    // vLLM, SGLang (over the whole prompt)
	}
	if len(tr.Stops) > 0 {
		b["stop"] = tr.Stops
	}
	if len(tr.Call) > 0 {
		b["json_schema"] = json.RawMessage(tr.Call) // llama-server
		b["guided_json"] = json.RawMessage(tr.Call) // vLLM
	}
	return "/v1/completions", b, nil
}

// readOllama reads /api/generate's NDJSON stream.
func (c *Client) readOllama(r io.Reader, b *turnBudget, text func(string)) (engine.TurnResult, int, error) {
	res := engine.TurnResult{Evaluated: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), b.maxLine())
	pieces := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m struct {
			Response        string `json:"response"`
			Done            bool   `json:"done"`
			DoneReason      string `json:"done_reason"`
			PromptEvalCount int    `json:"prompt_eval_count"`
			PromptEvalNanos int64  `json:"prompt_eval_duration"`
			EvalCount       int    `json:"eval_count"`
			Error           string `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return res, pieces, fmt.Errorf("an unreadable line %q: %w", chat.Clip(string(line), 120), err)
		}
		if m.Error != "" {
			return res, pieces, fmt.Errorf("the server reported: %s", m.Error)
		}
		if m.Response != "" {
			if !b.take(len(m.Response)) {
				res.Cut = true // a server past num_predict: the turn ends here
				return res, pieces, nil
			}
			pieces++
			text(m.Response)
		}
		if m.Done {
			res.Cut = m.DoneReason == "length"
			res.PromptTokens, res.Tokens = m.PromptEvalCount, m.EvalCount
			c.mu.Lock()
			c.usage.PromptTime += time.Duration(m.PromptEvalNanos)
			c.mu.Unlock()
			return res, pieces, nil
		}
	}
	if err := sc.Err(); err != nil {
		return res, pieces, err // the connection broke mid-answer
	}
	// The response ended properly but without its last record: ollama
	// stops an answer that repeats one token (whitespace included) more
	// than 30 times this way. The turn is over, cut short.
	res.Cut = true
	return res, pieces, nil
}

// readOpenAI reads /v1/completions' server-sent events.
func (c *Client) readOpenAI(r io.Reader, b *turnBudget, text func(string)) (engine.TurnResult, int, error) {
	res := engine.TurnResult{Evaluated: -1}
	pieces := 0
	err := readSSE(r, b.maxLine(), func(data []byte) (bool, error) {
		var m struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			openAIEvent
		}
		if err := decodeEvent(data, &m); err != nil {
			return false, err
		}
		if err := m.apply(&res); err != nil {
			return false, err
		}
		finished := false
		for _, ch := range m.Choices {
			if ch.Text != "" {
				if !b.take(len(ch.Text)) {
					return false, errTurnLimit
				}
				pieces++
				text(ch.Text)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finished = true
				res.Cut = *ch.FinishReason == "length"
			}
		}
		return finished, nil
	})
	if errors.Is(err, errTurnLimit) {
		res.Cut, err = true, nil // a server past max_tokens: the turn ends here
	}
	return res, pieces, err
}
