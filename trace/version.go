package trace

import (
	"encoding/json"
	"fmt"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// FormatVersion is the version of the file layout the writer writes.
// Readers read every version up to it:
//
//   - 1: the header's sampling object had Go field names (Temperature,
//     TopK, TopP, MinP, Seed, Grammar with GBNF, Lazy, TriggerWords,
//     TriggerPatterns) and three context keys were snake_case
//     (thread_choices, kv_type, flash_attn).
//   - 2: every key is camelCase.
//   - 3: the header records the run's configuration as facts (run), which
//     lloyal rerun and fork rebuild a run from; they refuse older traces.
const FormatVersion = 3

// parseHeader reads a header line of any version up to FormatVersion into
// the current Header.
func parseHeader(raw []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(raw, &h); err != nil {
		return Header{}, fmt.Errorf("bad header: %v", err)
	}
	if h.FormatVersion > FormatVersion {
		return Header{}, fmt.Errorf("trace format %d is newer than this lloyal reads (%d): update lloyal", h.FormatVersion, FormatVersion)
	}
	if h.FormatVersion < 2 {
		var old headerV1
		if err := json.Unmarshal(raw, &old); err != nil {
			return Header{}, fmt.Errorf("bad version-1 header: %v", err)
		}
		old.upgrade(&h)
	}
	return h, nil
}

// headerV1 is what version 1 wrote under other keys than version 2.
type headerV1 struct {
	Context struct {
		ThreadChoices []int  `json:"thread_choices"`
		KVType        string `json:"kv_type"`
		FlashAttn     bool   `json:"flash_attn"`
	} `json:"context"`
	Sampling struct {
		Temperature float32 `json:"Temperature"`
		TopK        int     `json:"TopK"`
		TopP        float32 `json:"TopP"`
		MinP        float32 `json:"MinP"`
		Seed        uint32  `json:"Seed"`
		Grammar     *struct {
			GBNF            string   `json:"GBNF"`
			Lazy            bool     `json:"Lazy"`
			TriggerWords    []string `json:"TriggerWords"`
			TriggerPatterns []string `json:"TriggerPatterns"`
		} `json:"Grammar"`
	} `json:"sampling"`
}

// upgrade sets what h read under version 2's keys from version 1's. (Go's
// decoder matches keys regardless of case, so h may have the sampling
// already; the old keys are authoritative for an old file.)
func (v headerV1) upgrade(h *Header) {
	h.Context.ThreadChoices, h.Context.KVType, h.Context.FlashAttn = v.Context.ThreadChoices, v.Context.KVType, v.Context.FlashAttn
	s := v.Sampling
	h.Sampling = engine.Sampling{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP, Seed: s.Seed}
	if g := s.Grammar; g != nil {
		h.Sampling.Grammar = &chat.Grammar{GBNF: g.GBNF, Lazy: g.Lazy, TriggerWords: g.TriggerWords, TriggerPatterns: g.TriggerPatterns}
	}
}
