package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// External is the corpus folder of pages "from the web": each names its
// address on a first line "Source: https://…". fetch_page serves them.
const External = "external"

// External reports whether d is one of the corpus's pages from the web.
func (d *Doc) External() bool { return strings.HasPrefix(d.Path, External+"/") }

// pages finds the corpus's external pages by address.
func pages(c *Corpus) map[string]*Doc {
	out := map[string]*Doc{}
	for _, d := range c.Docs {
		if !d.External() {
			continue
		}
		for _, l := range d.Lines[:min(len(d.Lines), 5)] {
			if u, ok := strings.CutPrefix(strings.TrimSpace(l), "Source:"); ok {
				out[strings.TrimSpace(u)] = d
			}
		}
	}
	return out
}

// FetchPageTool fetches one of the corpus's external pages by its address.
// Like a busy web proxy it admits a request and then wants a pause: the
// request after each admitted one is answered 429 with a Retry-After of pause
// (a transient failure: the runtime parks the agent and retries the call once
// the pause is over, and the proxy admits it). The limit counts requests
// rather than timing them, so the refusal happens on any machine: a window in
// seconds was never met where a busy core spaced two fetches past it.
func FetchPageTool(c *Corpus, pause time.Duration) engine.Tool {
	byURL := pages(c)
	var urls []string
	for u := range byURL {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	enum, _ := json.Marshal(urls)
	schema := fmt.Sprintf(`{"type":"object","properties":{"url":{"type":"string","enum":%s}},"required":["url"]}`, enum)
	if len(urls) == 0 {
		schema = `{"type":"object","properties":{"url":{"type":"string","maxLength":200}},"required":["url"]}`
	}
	var mu sync.Mutex
	owed := false // a request was admitted and no pause has been asked for since
	return engine.Typed(engine.ToolSpec{
		Name:        "fetch_page",
		Description: "Fetch a page from the web that the documents cite (community posts, vendor notes). Sites limit how often they answer: a refused fetch is retried for you.",
		Parameters:  json.RawMessage(schema),
		Fanout:      true,
	}, func(ctx context.Context, a struct{ URL string }) (any, error) {
		d, ok := byURL[a.URL]
		if !ok {
			return engine.ErrorResult("no page at %s: fetch one of %s", a.URL, strings.Join(urls, ", ")), nil
		}
		mu.Lock()
		refuse := owed
		owed = !owed
		mu.Unlock()
		if refuse {
			u, _ := url.Parse(a.URL)
			return nil, engine.Retry(pause, fmt.Errorf("the web proxy answered 429 Too Many Requests for %s: it wants a pause of %s after each request", u.Host, pause))
		}
		engine.OnProgress(ctx, 1, 1)
		text := strings.Join(d.Lines, "\n")
		// A page is long; the agent gets its opening, like a reader's first
		// screen (read_file has the rest).
		return map[string]any{"url": a.URL, "path": d.Path, "text": chat.Clip(text, 800)}, nil
	})
}
