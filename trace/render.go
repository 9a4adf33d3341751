package trace

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lloyal-ai/lloyal/engine"
)

// Text renders an event as one line of a readable log ("" for events a log
// leaves out, such as per-tick token text: turns carry the whole text).
// Control characters from model or tool output are escaped so a log can
// never repaint or retitle the terminal it is printed on.
func Text(e engine.Event) string {
	at := fmtAt(e.At)
	who := ""
	if e.Agent != 0 {
		who = fmt.Sprintf("agent %d ", e.Agent)
	}
	switch e.Type {
	case engine.PoolOpen:
		return fmt.Sprintf("%s pool opened %s", at, Clean(string(e.Data)))
	case engine.SpineCreate:
		return fmt.Sprintf("%s spine written: %d tokens", at, e.Tokens)
	case engine.SpineExtend:
		return fmt.Sprintf("%s spine extended with %q (%d tokens)", at, Clean(e.Text), e.Tokens)
	case engine.AgentSpawn:
		parent := ""
		if e.ParentAgent != 0 {
			parent = fmt.Sprintf(" (sub-agent of agent %d)", e.ParentAgent)
		}
		return fmt.Sprintf("%s %sstarted%s: %s", at, who, parent, Clean(e.Text))
	case engine.AgentTurn:
		return fmt.Sprintf("%s %swrote: %s", at, who, Clean(strings.TrimSpace(e.Text)))
	case engine.AgentToolCall:
		return fmt.Sprintf("%s %scalls %s %s", at, who, e.Tool, Clean(string(e.Args)))
	case engine.ToolResult:
		return fmt.Sprintf("%s %s← %s (%s): %s", at, who, e.Tool, e.Duration.Round(time.Millisecond), Clean(short(string(e.Result), 300)))
	case engine.ToolRetry:
		return fmt.Sprintf("%s %s%s failed transiently (%s): retry %d in %s", at, who, e.Tool, Clean(e.Reason), e.Attempt, e.RetryAfter)
	case engine.ToolError:
		return fmt.Sprintf("%s %s%s error: %s", at, who, e.Tool, Clean(e.Reason))
	case engine.AgentNudge:
		return fmt.Sprintf("%s %swas told (%s): %s", at, who, e.Reason, Clean(ErrorText(e.Result)))
	case engine.ApprovalRequested:
		return fmt.Sprintf("%s %sasks to run protected %s %s", at, who, e.Tool, Clean(string(e.Args)))
	case engine.ApprovalAnswered:
		return fmt.Sprintf("%s %s%s: %s after %s %s", at, who, e.Tool, Clean(string(e.Data)), e.Duration.Round(time.Millisecond), Clean(e.Reason))
	case engine.AgentDrop:
		return fmt.Sprintf("%s %sstopped: %s", at, who, e.Reason)
	case engine.RecoveryStart:
		return fmt.Sprintf("%s %swrites its report (%s)", at, who, e.Reason)
	case engine.RecoveryFailed:
		return fmt.Sprintf("%s %sreport failed: %s", at, who, e.Reason)
	case engine.AgentReturn:
		return fmt.Sprintf("%s %sreturned: %s", at, who, Clean(resultText(e.Result)))
	case engine.AgentRecovered:
		return fmt.Sprintf("%s %srecovered (%s): %s", at, who, e.Reason, Clean(resultText(e.Result)))
	case engine.AgentFailed:
		return fmt.Sprintf("%s %sfailed: %s", at, who, Clean(e.Reason))
	case engine.AgentCancelled:
		return fmt.Sprintf("%s %scancelled: %s", at, who, Clean(e.Reason))
	case engine.PoolWindDown:
		return fmt.Sprintf("%s finishing up: every agent writes its report", at)
	case engine.PoolPause:
		return fmt.Sprintf("%s paused", at)
	case engine.PoolResume:
		return fmt.Sprintf("%s resumed after %s", at, e.Duration.Round(time.Millisecond))
	case engine.PoolClose:
		return fmt.Sprintf("%s pool closed after %s (%d tokens)", at, e.Duration.Round(time.Millisecond), e.Tokens)
	case engine.SpawnRefused:
		return fmt.Sprintf("%s spawn refused: %s", at, Clean(e.Reason))
	}
	return ""
}

func fmtAt(d time.Duration) string {
	m := int(d / time.Minute)
	s := float64(d%time.Minute) / float64(time.Second)
	return fmt.Sprintf("[%02d:%06.3f]", m, s)
}

func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// ErrorText is the message of an {"error": …} result, or the raw JSON.
func ErrorText(raw json.RawMessage) string {
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &v) == nil && v.Error != "" {
		return v.Error
	}
	return string(raw)
}

func resultText(raw json.RawMessage) string {
	return engine.AgentResult{Result: raw}.Text()
}

// Clean makes text safe to print on one line of a terminal: control
// characters become visible escapes (Escape); newlines become "⏎ ".
func Clean(s string) string {
	return strings.NewReplacer("\n", "⏎ ", "\t", "  ").Replace(Escape(s))
}

// Escape makes control characters (ESC, BEL, carriage returns, C1 codes …)
// visible as \xNN so text from a model or a tool can neither repaint nor
// retitle a terminal. Newlines and tabs are kept for the caller to lay out.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
