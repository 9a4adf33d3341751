package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lloyal-ai/lloyal/harness"
)

// The sampling flags and --grounded: a value out of range (or not a
// number) is refused while the flags are parsed, naming the flag, the value
// and what to use; a good one lands in the Config; a flag not given stays
// nil, so the harness's choice for the model stands.
func TestSamplingFlags(t *testing.T) {
	f32 := func(v float32) *float32 { return &v }
	num := func(v int) *int { return &v }
	yes, no := true, false
	for _, c := range []struct {
		args     []string
		err      string // wanted in the error, which also names the flag and value
		sampling harness.Sampling
		grounded *bool
	}{
		{args: nil},
		{args: []string{"--temperature", "0"}, sampling: harness.Sampling{Temperature: f32(0)}},
		{args: []string{"--temperature=1.5", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05"},
			sampling: harness.Sampling{Temperature: f32(1.5), TopK: num(40), TopP: f32(0.9), MinP: f32(0.05)}},
		{args: []string{"--repeat-penalty", "1.1", "--repeat-last-n", "256"}, sampling: harness.Sampling{RepeatPenalty: f32(1.1), RepeatLastN: num(256)}},
		{args: []string{"--top-p", "1", "--min-p", "0", "--repeat-penalty", "0", "--repeat-last-n", "4096", "--temperature", "5"},
			sampling: harness.Sampling{TopP: f32(1), MinP: f32(0), RepeatPenalty: f32(0), RepeatLastN: num(4096), Temperature: f32(5)}},
		{args: []string{"--grounded"}, grounded: &yes},
		{args: []string{"--grounded=false"}, grounded: &no},
		{args: []string{"--temperature", "-0.1"}, err: "use 0 to 5"},
		{args: []string{"--temperature", "5.01"}, err: "use 0 to 5"},
		{args: []string{"--temperature", "NaN"}, err: "use 0 to 5"},
		{args: []string{"--temperature", "warm"}, err: "use 0 to 5"},
		{args: []string{"--temperature", "0.7x"}, err: "use 0 to 5"},
		{args: []string{"--top-k", "-1"}, err: "use 0 (all tokens) or more"},
		{args: []string{"--top-k", "2.5"}, err: "use 0 (all tokens) or more"},
		{args: []string{"--top-k", "99999999999"}, err: "use 0 (all tokens) or more"},
		{args: []string{"--top-p", "1.5"}, err: "use 0 to 1"},
		{args: []string{"--min-p", "-1"}, err: "use 0 to 1"},
		{args: []string{"--repeat-penalty", "6"}, err: "use 0 to 5"},
		{args: []string{"--repeat-penalty", "Inf"}, err: "use 0 to 5"},
		{args: []string{"--repeat-last-n", "4097"}, err: "use 0 to 4096"},
		{args: []string{"--repeat-last-n", "-64"}, err: "use 0 to 4096"},
		{args: []string{"--grounded=maybe"}, err: "invalid syntax"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var o runFlags
			err := newRunCmd(&o).ParseFlags(c.args)
			if c.err != "" {
				flag, value, _ := strings.Cut(strings.TrimPrefix(c.args[0], "--"), "=")
				if value == "" {
					value = c.args[1]
				}
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), `"--`+flag+`"`) || !strings.Contains(err.Error(), `"`+value+`"`) {
					t.Fatalf("err %v; want one naming --%s and %q, with %q", err, flag, value, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.cfg.Sampling, c.sampling) || !reflect.DeepEqual(o.cfg.Grounded, c.grounded) {
				t.Fatalf("config %s, grounded %s; want %s, grounded %s", asJSON(o.cfg.Sampling), asJSON(o.cfg.Grounded), asJSON(c.sampling), asJSON(c.grounded))
			}
		})
	}
}

// asJSON shows a value with its pointers followed (null: not given).
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Through the whole command: a refused sampling flag stops the run before a
// trace is started.
func TestRunRefusesBadSampling(t *testing.T) {
	dir := t.TempDir()
	out, err := runCLI(t, "run", "--headless", "--trace", filepath.Join(dir, "t.jsonl"), "--top-p", "2")
	if err == nil || !strings.Contains(err.Error(), `invalid argument "2" for "--top-p" flag: use 0 to 1`) {
		t.Fatalf("err %v\n%s", err, out)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "t.jsonl")); statErr == nil {
		t.Fatal("a refused run started a trace")
	}
}

// FuzzSamplingFlags: any value of any sampling flag is accepted within its
// range or refused naming the flag, never a panic.
func FuzzSamplingFlags(f *testing.F) {
	for _, v := range []string{"0", "0.7", "-1", "1e9", "NaN", "-Inf", "0x10", "1.5", " 3", "4096", "4097", "", "1 2"} {
		f.Add(v)
	}
	ranges := map[string][2]float64{"temperature": {0, 5}, "top-k": {0, math.MaxInt32}, "top-p": {0, 1}, "min-p": {0, 1},
		"repeat-penalty": {0, 5}, "repeat-last-n": {0, 4096}}
	f.Fuzz(func(t *testing.T, v string) {
		for flag, r := range ranges {
			var o runFlags
			err := newRunCmd(&o).ParseFlags([]string{"--" + flag, v})
			if err != nil {
				if !strings.Contains(err.Error(), `"--`+flag+`"`) {
					t.Fatalf("--%s %q: the error does not name the flag: %v", flag, v, err)
				}
				continue
			}
			s := o.cfg.Sampling
			var got float64
			switch {
			case s.Temperature != nil:
				got = float64(*s.Temperature)
			case s.TopK != nil:
				got = float64(*s.TopK)
			case s.TopP != nil:
				got = float64(*s.TopP)
			case s.MinP != nil:
				got = float64(*s.MinP)
			case s.RepeatPenalty != nil:
				got = float64(*s.RepeatPenalty)
			case s.RepeatLastN != nil:
				got = float64(*s.RepeatLastN)
			default:
				t.Fatalf("--%s %q accepted but not in the Config", flag, v)
			}
			if !(got >= r[0] && got <= r[1]) {
				t.Fatalf("--%s %q accepted as %v, outside %v", flag, v, got, r)
			}
		}
	})
}
