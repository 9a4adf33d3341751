package serverbackend

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Endpoint is a server that answers one kind of JSON request beside the
// chat: a service's reranker, embedder or judge (package services). It
// keeps the chat client's rules: its key goes only to its own origin (a
// redirect elsewhere is refused before anything is sent), no proxy from
// the environment, every answer read to a bound, every request under a
// time limit.
type Endpoint struct {
	base    *url.URL
	key     string
	timeout time.Duration
	hints   hints
	hc      *http.Client
	tr      *http.Transport
}

// EndpointOptions configure NewEndpoint.
type EndpointOptions struct {
	// Key is sent as a bearer token, to the endpoint's origin only.
	Key string
	// Timeout bounds each request (default 60 s).
	Timeout time.Duration
	// URLFrom and KeyFrom say where the user gives the URL and the key (a
	// harness entry, a variable): the messages that say what to check
	// name them. Empty: the chat server's (--server, LLOYAL_API_KEY).
	URLFrom, KeyFrom string
}

// maxAnswer bounds a service's answer: embeddings of a few hundred
// passages are a few megabytes.
const maxAnswer = 32 << 20

// NewEndpoint is the server at rawURL, as o says.
func NewEndpoint(rawURL string, o EndpointOptions) (*Endpoint, error) {
	base, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("server %q: not an http(s) URL; use e.g. http://127.0.0.1:8080", rawURL)
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("server %q: give the server's URL without a query (e.g. http://127.0.0.1:8080): lloyal adds the endpoint's path, /v1/rerank and the like", redact(base))
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	h := chatHints()
	h.url = cmp.Or(o.URLFrom, h.url)
	h.key = cmp.Or(o.KeyFrom, h.key)
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	e := &Endpoint{base: base, key: o.Key, timeout: timeout, hints: h, tr: tr}
	e.hc = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		return checkRedirect(base, h, req, via)
	}}
	return e, nil
}

// Name is the endpoint's URL without credentials or query.
func (e *Endpoint) Name() string { return redact(e.base) }

// Close releases idle connections.
func (e *Endpoint) Close() { e.tr.CloseIdleConnections() }

// Post sends body as JSON to path and decodes the answer into out. A
// refusal is the server's own message; a web page where JSON belongs says
// what to check.
func (e *Endpoint) Post(ctx context.Context, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base.JoinPath(path).String(), strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return unreached(e.Name(), err)
	}
	defer resp.Body.Close()
	if err := answered(resp, e.hints); err != nil {
		return fmt.Errorf("%s%s: %w", e.Name(), path, err)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s%s: the answer is not the JSON expected: %w", e.Name(), path, err)
	}
	return nil
}
