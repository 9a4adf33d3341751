package abilities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lloyal-ai/lloyal/engine/event"
)

// startWarned starts ab's server like startServer but returns the
// warnings of its start instead of refusing them.
func startWarned(t *testing.T, ab *Installed) (*Server, map[string]*Tool, *watched, []string) {
	t.Helper()
	s, err := NewServer(ab, "test")
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{}
	s.onProgress = func(_ context.Context, p progress) {
		w.mu.Lock()
		w.progress = append(w.progress, p)
		w.mu.Unlock()
	}
	s.note = func(_ context.Context, name string, data any) {
		b, _ := json.Marshal(data)
		w.mu.Lock()
		w.notes = append(w.notes, name+" "+string(b))
		w.mu.Unlock()
	}
	t.Cleanup(s.Close)
	list, warnings, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*Tool{}
	for _, tl := range list {
		tools[tl.Spec().Name] = tl.(*Tool)
	}
	return s, tools, w, warnings
}

// A line on a server's stdout that is not JSON-RPC — a banner at start, log
// lines during a call — is skipped, never the end of the server: it starts
// (with a warning naming the line), the call answers, and the trace notes
// each line with the call.
func TestStdoutLinesThatAreNotJSONRPC(t *testing.T) {
	ab, _ := testAbilityArgs(t, "", []string{"--banner", "--tools", "log,count"})
	_, tools, w, warnings := startWarned(t, ab)
	if len(warnings) != 1 || !strings.Contains(warnings[0], `1 line(s) on stdout that are not MCP messages, skipped (the first: "mcpserver 0.1.0 starting: listening on stdio")`) {
		t.Fatalf("warnings %q", warnings)
	}
	if r := call(t, tools["test_log"], `{}`); r["text"] != "logged" {
		t.Fatalf("a call whose server logs on stdout: %v", r)
	}
	if r := call(t, tools["test_count"], `{"n":2}`); r["text"] != "counted to 2" {
		t.Fatalf("the next call: %v", r)
	}
	notes := w.noted()
	for _, line := range []string{"mcpserver 0.1.0 starting: listening on stdio", "[info] handling a call to log", `{\"level\":30,\"msg\":\"pino says hello\"}`} {
		if !strings.Contains(notes, `ability {"ability":"test","event":"stdout","line":"`+line+`","reason":"not a JSON-RPC message, skipped"}`) {
			t.Errorf("no note of %s in:\n%s", line, notes)
		}
	}
	if strings.Contains(notes, event.FailedNote) {
		t.Errorf("a call failed:\n%s", notes)
	}
}

// The stdout filter hands the client JSON-RPC lines only, in order; a line
// of anything else, or one over the line limit, is handed to skipped (its
// start only), and progress notifications to progress, before the lines
// after them.
func TestStdoutFilter(t *testing.T) {
	long := strings.Repeat("x", 300)
	in := strings.Join([]string{
		"Server v1 ready",
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		"",
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1.5,"message":"half"}}`,
		`{"level":"info","msg":"not json-rpc"}`,
		`[{"jsonrpc":"2.0","id":2,"result":{}}]`,
		"[warn] a log line in brackets",
		`{"jsonrpc":"2.0","id":3,"result":{"t":"` + long + `"}}`,
		long,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
	}, "\n") + "\n"
	var order []string
	f := newStdoutFilter(io.NopCloser(strings.NewReader(in)), 150,
		func(line []byte, long bool) { order = append(order, fmt.Sprintf("skipped %v %q", long, line)) },
		func(p *mcp.ProgressNotificationParams) {
			order = append(order, fmt.Sprintf("progress %v %v %q", p.ProgressToken, p.Progress, p.Message))
		})
	// Read in small pieces, as a decoder may.
	var out bytes.Buffer
	buf := make([]byte, 7)
	for {
		n, err := f.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `[{"jsonrpc":"2.0","id":2,"result":{}}]` + "\n" + `{"jsonrpc":"2.0","id":4,"result":{}}` + "\n"; out.String() != want {
		t.Errorf("the client read:\n%s\nwant:\n%s", out.String(), want)
	}
	want := []string{
		`skipped false "Server v1 ready\n"`,
		`progress t 1.5 "half"`,
		`skipped false "{\"level\":\"info\",\"msg\":\"not json-rpc\"}\n"`,
		`skipped false "[warn] a log line in brackets\n"`,
		fmt.Sprintf("skipped true %q", (`{"jsonrpc":"2.0","id":3,"result":{"t":"` + long)[:maxNotedBytes]),
		fmt.Sprintf("skipped true %q", long[:maxNotedBytes]),
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("handed out:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
}

// The trace keeps at most maxNotedLines skipped lines a run, each cut to
// maxNotedBytes; the last one says that more are not noted.
func TestSkippedLinesBounded(t *testing.T) {
	var n lineNotes
	for i := range 1000 {
		n.add("demo", []byte(fmt.Sprintf("line %d %s\n", i, strings.Repeat("é", 200))), false, 100)
	}
	notes := n.take()
	if len(notes) != maxNotedLines {
		t.Fatalf("%d notes, want %d", len(notes), maxNotedLines)
	}
	for _, note := range notes {
		if l := note["line"].(string); len(l) > maxNotedBytes+len("…") || !strings.HasSuffix(l, "…") {
			t.Fatalf("a note of %d bytes: %q", len(l), l)
		}
	}
	if notes[maxNotedLines-1]["more"] == nil {
		t.Fatalf("the last note does not say more are skipped: %v", notes[maxNotedLines-1])
	}
	if seen, first := n.count(); seen != 1000 || !strings.HasPrefix(first, "line 0 ") {
		t.Fatalf("count %d, first %q", seen, first)
	}
	if len(n.take()) != 0 {
		t.Fatal("notes taken twice")
	}
}

// A flood of progress notifications reaches the app as at most one report
// per progressEvery, and the last one (its message included) before the
// call's result.
func TestProgressFloodCoalesced(t *testing.T) {
	ab, _ := testAbility(t, "", "flood")
	_, tools, w := startServer(t, ab)
	start := time.Now()
	r := call(t, tools["test_flood"], `{"n":5000}`)
	elapsed := time.Since(start)
	got := w.reported() // as the call returned: nothing comes after
	if r["text"] != "flooded 5000" {
		t.Fatalf("flood: %v", r)
	}
	if len(got) == 0 || got[len(got)-1] != (progress{5000, 5000, "flooding"}) {
		t.Fatalf("the last report is not the last notification: %v", got)
	}
	if most := int(elapsed/progressEvery) + 2; len(got) > most {
		t.Fatalf("%d reports in %s, want at most %d (one per %s, and the last)", len(got), elapsed, most, progressEvery)
	}
	time.Sleep(2 * progressEvery)
	if n := len(w.reported()); n != len(got) {
		t.Fatalf("%d reports after the result, want none", n-len(got))
	}
}

// A call that keeps reporting progress is working: it runs past the
// ability's timeout and answers. Its progress without a total keeps its
// fractions and its message.
func TestProgressKeepsACallAlive(t *testing.T) {
	// Reports 150 ms apart against a 1 s timeout: a loaded machine may
	// delay one by most of a second before the call looks hung.
	ab, _ := testAbility(t, `,"timeout":"1s"`, "slow")
	_, tools, w := startServer(t, ab)
	// 8 steps of 150 ms: 1.2 s in all, past the timeout.
	if r := call(t, tools["test_slow"], `{"steps":8,"every":150}`); r["text"] != "done" {
		t.Fatalf("a call reporting progress past its timeout: %v", r)
	}
	got := w.reported()
	if len(got) < 2 || got[0] != (progress{0.5, 0, "working on step 1"}) || got[len(got)-1] != (progress{7.5, 0, "working on step 8"}) {
		t.Fatalf("progress %v", got)
	}
	if notes := w.noted(); notes != "" {
		t.Fatalf("notes %s", notes)
	}
}

// Even a call that reports progress ends: at progressRuns times its
// timeout (here less, to be quick) it is stopped as hung, saying so.
func TestProgressForeverEnds(t *testing.T) {
	ab, _ := testAbility(t, `,"timeout":"400ms"`, "forever")
	s, tools, w := startServer(t, ab)
	s.maxRun = 1200 * time.Millisecond
	r := call(t, tools["test_forever"], `{}`)
	if !strings.Contains(fmt.Sprint(r["error"]), overran(1200*time.Millisecond)) {
		t.Fatalf("a call reporting progress forever: %v", r)
	}
	if notes := w.noted(); !strings.Contains(notes, event.FailedNote+` {"ability":"test","event":"hung"`) {
		t.Fatalf("notes %s", notes)
	}
}

// Images and blobs a server puts in its structured content (as
// server-filesystem's read_media_file does) reach the model as references
// to attachments, never as base64 text.
func TestStructuredImagesLifted(t *testing.T) {
	ab, _ := testAbility(t, "", "image")
	_, tools, _ := startServer(t, ab)
	v, err := tools["test_image"].Execute(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r := v.(map[string]any)
	att, _ := r["_attachments"].([]map[string]any)
	delete(r, "_attachments")
	text, _ := json.Marshal(r)
	for _, b64 := range []string{"iVBORw0KGgpub3QgcmVhbGx5IGEgcGljdHVyZQ==", "YmluYXJ5IGRhdGE="} {
		if strings.Contains(string(text), b64) {
			t.Fatalf("base64 reaches the model: %s", text)
		}
	}
	if want := `{"caption":"a chart","content":[{"attachment":"image-1","mimeType":"image/png","type":"image"},{"resource":{"attachment":"file:///data.bin","mimeType":"application/octet-stream","uri":"file:///data.bin"},"type":"resource"}]}`; string(text) != want {
		t.Errorf("the model reads %s, want %s", text, want)
	}
	if len(att) != 2 || att[0]["name"] != "image-1" || string(att[0]["data"].([]byte)) != "\x89PNG\r\n\x1a\nnot really a picture" || att[1]["name"] != "file:///data.bin" {
		t.Errorf("attachments %v", att)
	}
}
