package approvals

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/engine/event"
)

// LinePrompter asks about protected calls on a plain terminal (headless runs
// whose input is a terminal), one request at a time, in arrival order.
type LinePrompter struct {
	b     *Broker
	in    *bufio.Reader
	out   io.Writer
	queue chan event.ApprovalRequest
}

// NewLinePrompter attaches a prompter to b. Call Run to start asking.
func NewLinePrompter(b *Broker, in io.Reader, out io.Writer) *LinePrompter {
	lp := &LinePrompter{b: b, in: bufio.NewReader(in), out: out, queue: make(chan event.ApprovalRequest, 256)}
	// OnRequest must not block: past the queue's room a call is denied,
	// not parked where nobody will ask about it.
	b.OnRequest = func(r event.ApprovalRequest) {
		select {
		case lp.queue <- r:
		default:
			_ = b.Answer(r.CallID, event.Decision{Answer: event.Deny, Reason: fmt.Sprintf("%d calls already wait for an answer", cap(lp.queue)), By: "cancel"})
		}
	}
	return lp
}

// Run answers requests until ctx ends or input closes (then every request
// still pending, and every later one, is denied: nobody is left to
// answer).
func (lp *LinePrompter) Run(ctx context.Context) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		for {
			s, skipped, err := readLine(lp.in, MaxAnswer)
			if skipped {
				fmt.Fprintf(lp.out, "  (a line of more than %d bytes was ignored)\n", MaxAnswer)
			} else if s != "" || err == nil {
				lines <- s
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var req event.ApprovalRequest
		select {
		case <-ctx.Done():
			return
		case req = <-lp.queue:
		}
		if !lp.stillPending(req.CallID) {
			continue // answered meanwhile (timeout, cancel)
		}
		fmt.Fprint(lp.out, Describe(req))
		// ask prints a prompt and reads a line; false when the run ends or
		// the input closes (then nobody is left to answer: deny what waits).
		ask := func(prompt string) (string, bool) {
			fmt.Fprint(lp.out, prompt)
			select {
			case <-ctx.Done():
				return "", false
			case line, ok := <-lines:
				if !ok {
					// Nobody is left to answer this request or any later one.
					lp.b.Close("input closed before anyone answered")
				}
				return line, ok
			}
		}
		for {
			line, ok := ask(keysPrompt())
			if !ok {
				return
			}
			d, valid := ParseAnswer(line)
			if !valid {
				continue
			}
			if k, _ := KeyFor(strings.TrimSpace(line)); k.AskReason {
				if line, ok = ask("  reason (the model reads it): "); !ok {
					return
				}
				d.Reason = strings.TrimSpace(line)
			}
			if err := lp.b.Answer(req.CallID, d); err != nil && err != ErrAlreadyAnswered {
				fmt.Fprintf(lp.out, "  (%v)\n", err)
			}
			break
		}
	}
}

// MaxAnswer is the longest line the prompter reads as an answer (a key, or
// a reason for the model); a longer line is skipped, never held whole.
const MaxAnswer = 4096

// readLine reads a line of at most max bytes. A longer one is read to its
// end and dropped (skipped): input that never ends a line, such as
// /dev/zero, costs no memory.
func readLine(r *bufio.Reader, max int) (line string, skipped bool, err error) {
	var buf []byte
	for {
		chunk, e := r.ReadSlice('\n')
		if !skipped {
			if len(buf)+len(chunk) > max {
				skipped, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(e, bufio.ErrBufferFull) {
			continue
		}
		return string(buf), skipped, e
	}
}

func (lp *LinePrompter) stillPending(id string) bool {
	for _, p := range lp.b.Pending() {
		if p.CallID == id {
			return true
		}
	}
	return false
}

// ParseAnswer reads a typed answer: one of AnswerKeys, or any other text as
// a denial with that reason. An empty line is not an answer. (For the
// deny-with-a-reason key the caller asks for the reason next.)
func ParseAnswer(line string) (event.Decision, bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return event.Decision{}, false
	}
	if k, ok := KeyFor(line); ok {
		return event.Decision{Answer: k.Answer, By: "user"}, true
	}
	return event.Decision{Answer: event.Deny, Reason: line, By: "user"}, true
}

// Describe renders a request for a person: who, what, and the complete
// arguments, pretty-printed.
func Describe(r event.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nagent %d wants to run the protected tool %s\n", r.Agent, r.Tool)
	if r.Origin != "" && r.Origin != engine.OriginBuiltin {
		// What "s" and "A" would grant: this tool, not its name.
		fmt.Fprintf(&b, "  from: %s\n", r.Origin)
	}
	if r.Why != "" {
		fmt.Fprintf(&b, "  what it does: %s\n", r.Why)
	}
	fmt.Fprintf(&b, "  arguments:\n%s\n", indent(PrettyArgs(r.Args), "    "))
	return b.String()
}

// PrettyArgs indents JSON arguments; invalid JSON is shown as it is.
func PrettyArgs(args json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, args, "", "  "); err != nil {
		return string(args)
	}
	return buf.String()
}

func indent(s, pad string) string {
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}
