package serverbackend

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/chat"
)

// openAIEvent is what every OpenAI-compatible stream event may carry
// besides its choices: the usage (in the last event, with
// stream_options.include_usage), llama-server's timings, an error.
type openAIEvent struct {
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		Details          *struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings *struct {
		PromptN int `json:"prompt_n"`
	} `json:"timings"` // llama-server
	Error any `json:"error"`
}

// apply records the event's counts in res, or says the server's error.
func (e openAIEvent) apply(res *engine.TurnResult) error {
	if e.Error != nil {
		return fmt.Errorf("the server reported: %v", e.Error)
	}
	if u := e.Usage; u != nil {
		res.PromptTokens, res.Tokens = u.PromptTokens, u.CompletionTokens
		if u.Details != nil {
			res.Evaluated = u.PromptTokens - u.Details.Cached
		}
	}
	if e.Timings != nil {
		res.Evaluated = e.Timings.PromptN
	}
	return nil
}

// readSSE reads server-sent events, passing each one's data to each, which
// decodes it into v (a struct embedding openAIEvent) first. each answers
// whether the answer's end (a finish_reason) has been seen. The stream is
// over at [DONE] or at its end; either before the answer's end is a stream
// cut short (io.ErrUnexpectedEOF), as is a broken connection. No line may
// be longer than maxLine (bufio.ErrTooLong).
func readSSE(r io.Reader, maxLine int, each func(data []byte) (finished bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	finished := false
	for sc.Scan() {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(sc.Bytes()), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			break
		}
		f, err := each(data)
		if err != nil {
			return err
		}
		finished = finished || f
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !finished {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// decodeEvent decodes an event's data, naming it when it is not JSON.
func decodeEvent(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("an unreadable event %q: %w", chat.Clip(string(data), 120), err)
	}
	return nil
}
