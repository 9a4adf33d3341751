package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
)

// TestSchemaRemoteRefNotFetched: a tool's schema is untrusted input; a
// "$ref" to an http URL is never fetched — not when a pool opens with the
// tool, not when ValidateArgs checks arguments against it.
func TestSchemaRemoteRefNotFetched(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	params := json.RawMessage(`{"type":"object","properties":{"q":{"$ref":"` + srv.URL + `/x"}}}`)
	spec := engine.ToolSpec{Name: "remote", Description: "d", Parameters: params}

	_, _ = engine.ValidateArgs(spec, json.RawMessage(`{"q":"a"}`))
	if n := hits.Load(); n != 0 {
		t.Fatalf("ValidateArgs fetched the schema's $ref: %d requests", n)
	}

	h := newHarness(t, 4096, engine.Options{})
	h.be.Script("lighthouse question", reportCall("done"))
	tool := engine.Func{S: spec, Fn: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }}
	_, _ = h.rt.Run(context.Background(), engine.PoolSpec{System: "s", Tools: []engine.Tool{tool}, Terminal: report,
		Orchestrate: engine.Parallel(engine.AgentSpec{Task: "lighthouse question"})})
	if n := hits.Load(); n != 0 {
		t.Fatalf("opening a pool fetched a tool schema's $ref: %d requests", n)
	}
}
