package trace

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// testdata/v1.jsonl is a trace the version-1 writer wrote (a run on the
// scripted double, every header key filled): its sampling has Go field
// names and three context keys are snake_case.
const v1Trace = "testdata/v1.jsonl"

// The header values version 1 wrote, as every reader must see them.
var (
	v1Sampling = engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 3,
		Grammar: &chat.Grammar{GBNF: `root ::= "x"`, Lazy: true, TriggerWords: []string{"<tool_call>"}, TriggerPatterns: []string{`\s*\{`}}}
	v1Context = ContextInfo{NCtx: 4096, NBatch: 512, NSeqMax: 8, Threads: 2, ThreadChoices: []int{1, 2}, KVType: "q8_0", FlashAttn: true, SoftLimit: 1024, HardLimit: 512}
)

func checkV1Header(t *testing.T, h *Header) {
	t.Helper()
	if h == nil {
		t.Fatal("no header")
	}
	if h.FormatVersion != 1 || !reflect.DeepEqual(h.Sampling, v1Sampling) || !reflect.DeepEqual(h.Context, v1Context) ||
		h.Model.Ref != "double" || len(h.Tools) != 2 || h.AbilitySources()["echo"] == "" {
		t.Fatalf("version-1 header read as %+v (sampling %+v, grammar %+v)", h, h.Sampling, h.Sampling.Grammar)
	}
}

// A version-1 file reads as it did: trace check, stats, the replay index
// (the app's replay) and the headless replay.
func TestVersion1TraceReads(t *testing.T) {
	c, err := CheckFile(v1Trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Problems) != 0 || c.Close == nil || c.Close.Reason != "completed" || uint64(c.Events) != c.Close.Events || c.Events == 0 {
		t.Fatalf("check: %+v", c)
	}
	checkV1Header(t, c.Header)

	var st Stats
	closing, problems, err := Follow(context.Background(), v1Trace, false, func(e event.Event) error { st.Collect(e); return nil })
	if err != nil || len(problems) != 0 || closing == nil {
		t.Fatalf("stats: %v %v %v", err, problems, closing)
	}
	if len(st.Agents) != 2 || st.ToolCalls["echo"] != 1 || st.Outcomes[event.Returned] != 2 {
		t.Fatalf("stats %+v", st)
	}

	ix, err := BuildIndex(v1Trace)
	if err != nil {
		t.Fatal(err)
	}
	checkV1Header(t, ix.Header)
	if ix.Len() != c.Events || ix.Close == nil || len(ix.Problems) != 0 {
		t.Fatalf("index: %d events, %+v", ix.Len(), ix)
	}
	if e, err := ix.Event(ix.NextOf(-1, event.KindToolCall)); err != nil || e.Tool != "echo" {
		t.Fatalf("index seek: %v %+v", err, e)
	}

	var out bytes.Buffer
	if _, _, err := Play(context.Background(), v1Trace, 0, false, &out); err != nil || !strings.Contains(out.String(), "returned: alpha done") {
		t.Fatalf("headless replay: %v\n%s", err, out.String())
	}
}

// A version-1 header written again is version 2 with the same values.
func TestVersion1HeaderRewritesAsVersion2(t *testing.T) {
	c, err := CheckFile(v1Trace)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v2.jsonl")
	w, err := Create(path, *c.Header)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close("completed"); err != nil {
		t.Fatal(err)
	}
	c2, err := CheckFile(path)
	if err != nil || len(c2.Problems) != 0 {
		t.Fatal(err, c2.Problems)
	}
	if c2.Header.FormatVersion != FormatVersion {
		t.Fatalf("written as version %d", c2.Header.FormatVersion)
	}
	c2.Header.FormatVersion = 1
	if !reflect.DeepEqual(c2.Header, c.Header) {
		t.Fatalf("values changed:\n v1 %+v\n v2 %+v", c.Header, c2.Header)
	}
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		refused      bool
	}{
		{"version 1", `{"type":"trace:header","formatVersion":1,"sampling":{"TopK":40,"Seed":9}}`, false},
		{"version 2", `{"type":"trace:header","formatVersion":2,"sampling":{"topK":40,"seed":9}}`, false},
		{"version 3", `{"type":"trace:header","formatVersion":3,"sampling":{"topK":40,"seed":9},"run":{"ctx":4096}}`, false},
		{"version 4", `{"type":"trace:header","formatVersion":4,"sampling":{"topK":40,"seed":9}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CheckReader(strings.NewReader(tc.header + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused {
				if c.Header != nil || len(c.Problems) == 0 || !strings.Contains(c.Problems[len(c.Problems)-1].Reason, "newer than this lloyal reads") {
					t.Fatalf("not refused: %+v", c)
				}
				return
			}
			if c.Header == nil || c.Header.Sampling.TopK != 40 || c.Header.Sampling.Seed != 9 {
				t.Fatalf("%+v", c)
			}
		})
	}
}
