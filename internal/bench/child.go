package bench

import (
	"context"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/childproc"
)

// runChild runs a child that dies with this process, kill -9 included,
// and with ctx (childproc.CommandContext), to its end, and returns the
// last maxOutput bytes it wrote (stdout and stderr), for the error that
// shows them.
func runChild(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := childproc.CommandContext(ctx, name, args...)
	var out lastBytes
	cmd.Stdout, cmd.Stderr = &out, &out // one writer: exec copies to it from one goroutine
	if err := childproc.Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.b, err
}

// maxOutput is what runChild keeps of a child's output.
const maxOutput = 64 << 10

// lastBytes keeps the last maxOutput bytes written to it.
type lastBytes struct{ b []byte }

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > maxOutput {
		l.b = l.b[len(l.b)-maxOutput:]
	}
	return len(p), nil
}

// shellQuote is s as one word of a POSIX shell's command line.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
