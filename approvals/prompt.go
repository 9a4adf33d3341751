package approvals

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
	b.OnRequest = func(r event.ApprovalRequest) { lp.queue <- r }
	return lp
}

// Run answers requests until ctx ends or input closes (then every request
// still pending is denied: nobody is left to answer).
func (lp *LinePrompter) Run(ctx context.Context) {
	lines := make(chan string)
	go func() {
		defer close(lines)
		for {
			s, err := lp.in.ReadString('\n')
			if s != "" || err == nil {
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
		for {
			fmt.Fprint(lp.out, "  [a] allow once  [s] allow for this session  [A] always  [d] deny  (or type a reason to deny): ")
			var line string
			var ok bool
			select {
			case <-ctx.Done():
				return
			case line, ok = <-lines:
			}
			if !ok {
				lp.b.Withdraw(0, "input closed before anyone answered")
				return
			}
			d, valid := ParseAnswer(line)
			if !valid {
				continue
			}
			if err := lp.b.Answer(req.CallID, d); err != nil && err != ErrAlreadyAnswered {
				fmt.Fprintf(lp.out, "  (%v)\n", err)
			}
			break
		}
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

// ParseAnswer reads a typed answer: a, s, A, d, or any other text as a
// denial with that reason. An empty line is not an answer.
func ParseAnswer(line string) (event.Decision, bool) {
	line = strings.TrimRight(line, "\r\n")
	switch strings.TrimSpace(line) {
	case "":
		return event.Decision{}, false
	case "a", "y", "yes":
		return event.Decision{Answer: event.AllowOnce, By: "user"}, true
	case "s":
		return event.Decision{Answer: event.AllowSession, By: "user"}, true
	case "A":
		return event.Decision{Answer: event.AllowAlways, By: "user"}, true
	case "d", "n", "no":
		return event.Decision{Answer: event.Deny, By: "user"}, true
	}
	return event.Decision{Answer: event.Deny, Reason: strings.TrimSpace(line), By: "user"}, true
}

// Describe renders a request for a person: who, what, and the complete
// arguments, pretty-printed.
func Describe(r event.ApprovalRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nagent %d wants to run the protected tool %s\n", r.Agent, r.Tool)
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
