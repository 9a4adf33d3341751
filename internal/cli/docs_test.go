package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The docs show command lines a reader will copy: each one that starts with
// `lloyal` names a real subcommand and flags that command accepts, so a
// renamed or removed flag fails here rather than in a reader's shell.
func TestDocsCommandLinesParse(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range docCommandLines(string(b)) {
			checked++
			if err := checkCommandLine(l.text); err != nil {
				t.Errorf("%s:%d: %s\n\t%v", strings.TrimPrefix(path, "../../"), l.line, l.text, err)
			}
		}
	}
	// A broken extractor would pass every doc by finding nothing.
	if checked < 20 {
		t.Fatalf("found only %d lloyal command lines in README.md and docs/", checked)
	}
}

func TestCheckCommandLine(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"lloyal run --headless --grant write_note", true},
		{"lloyal run --model PATH|OLLAMA_NAME --ctx N --kv-type q8_0|q4_0", true},
		{"lloyal run --think=off --task \"What is a lease in Tidewater?\"", true},
		{"lloyal model tiny -o FILE --preset bench", true},
		{"lloyal ability install PATH [--allow-unsigned]", true},
		{"lloyal grants list|revoke TOOL", true},
		{"lloyal CMD --help", true},
		{"LLOYAL_DEV=1 lloyal run", true},
		{"lloyal --version", true},
		{"lloyal run --no-such-flag", false},
		{"lloyal run --ctx many", false},
		{"lloyal run --kv-type q8_0|q5_0", false},
		{"lloyal model tiny -x FILE", false},
		{"lloyal tracee check FILE", false},
		{"lloyal trace chek FILE", false},
		{"lloyal grants list|forget TOOL", false},
		{"lloyal run --version", false},
		{"lloyal run --task \"unclosed", false},
	} {
		if err := checkCommandLine(c.line); (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.line, err, c.ok)
		}
	}
}

func TestDocCommandLines(t *testing.T) {
	md := "Run `lloyal run\n--headless` here; `lloyal-demo` is a name.\n" +
		"| `lloyal grants list\\|revoke TOOL` | x |\n" +
		"``lloyal trace stats FILE``\n" +
		"```sh\n" +
		"$ lloyal model train -o base.gguf \\\n    --steps 700   # the first run\n" +
		"make run\n" +
		" lloyal · a screen, not a command\n" +
		"```\n" +
		"`lloyal` alone\n"
	var got []string
	for _, l := range docCommandLines(md) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.text))
	}
	want := []string{
		"1:lloyal run --headless",
		"3:lloyal grants list|revoke TOOL",
		"4:lloyal trace stats FILE",
		"6:lloyal model train -o base.gguf --steps 700",
		"11:lloyal",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// docLine is a command line found in Markdown, with the line it starts on.
type docLine struct {
	line int
	text string
}

var envAssign = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*=\S*\s+)+`)

// commandStart reports whether s, after any VAR=value prefixes, runs lloyal.
func commandStart(s string) (string, bool) {
	s = envAssign.ReplaceAllString(s, "")
	first, _, _ := strings.Cut(s, " ")
	if first == "lloyal" || strings.HasSuffix(first, "/lloyal") {
		return "lloyal" + strings.TrimPrefix(s, first), true
	}
	return "", false
}

// docCommandLines returns the lloyal command lines of a Markdown text: lines
// of fenced code blocks that start with one (a shell's `$ ` prompt, `\`
// continuations and `#` comments allowed), and inline code spans that hold
// one, which may wrap across lines and sit in tables (`\|`).
func docCommandLines(md string) []docLine {
	code, prose := splitFences(md)
	var found []docLine
	for _, l := range code {
		if c, ok := commandStart(strings.TrimPrefix(l.text, "$ ")); ok {
			if j := strings.Index(c, " #"); j >= 0 {
				c = c[:j]
			}
			found = append(found, docLine{l.line, strings.Join(strings.Fields(c), " ")})
		}
	}
	for _, span := range codeSpans(prose) {
		text := strings.ReplaceAll(span.text, `\|`, "|")
		if c, ok := commandStart(strings.Join(strings.Fields(text), " ")); ok {
			found = append(found, docLine{span.line, c})
		}
	}
	sort.SliceStable(found, func(a, b int) bool { return found[a].line < found[b].line })
	return found
}

// splitFences returns the lines of fenced code blocks, each joined with its
// `\` continuations, and the rest of the text with those blocks blanked, so
// line numbers still count from the top.
func splitFences(md string) (code []docLine, prose string) {
	lines := strings.Split(md, "\n")
	rest := make([]string, len(lines))
	fence := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		marker := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(marker, "```") || strings.HasPrefix(marker, "~~~")) &&
			!strings.Contains(marker[3:], marker[:1]): // "``` `x` ```" is a code span, not a fence
			fence = marker[:3]
		case fence != "" && strings.HasPrefix(marker, fence):
			fence = ""
		case fence != "":
			start := i
			for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
				i++
				l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(lines[i])
			}
			code = append(code, docLine{start + 1, l})
		default:
			rest[i] = l
		}
	}
	return code, strings.Join(rest, "\n")
}

// codeSpans returns the inline code spans of a text: a run of backticks up
// to the next run of the same length, as CommonMark reads them.
func codeSpans(text string) []docLine {
	var spans []docLine
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		end := closingRun(text, i+n, n)
		if end < 0 {
			i += n
			continue
		}
		spans = append(spans, docLine{strings.Count(text[:i], "\n") + 1, text[i+n : end]})
		i = end + n
	}
	return spans
}

// closingRun finds the next run of exactly n backticks from j, or -1.
func closingRun(text string, j, n int) int {
	for j < len(text) {
		k := strings.IndexByte(text[j:], '`')
		if k < 0 {
			return -1
		}
		k += j
		run := k
		for run < len(text) && text[run] == '`' {
			run++
		}
		if run-k == n {
			return k
		}
		j = run
	}
	return -1
}

// placeholder is a value a reader fills in: FILE, N, PATH|OLLAMA_NAME, FILE.json.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\.[a-z0-9]+)?(\|[A-Z][A-Z0-9_]*(\.[a-z0-9]+)?)*$`)

// checkCommandLine parses a documented command line against the real
// command tree without running it. `a|b` at a subcommand's place, or in a
// flag's value, means each of them; a placeholder at a subcommand's place
// means every subcommand there; placeholders stand for any positional
// argument or flag value; `[...]` marks an optional part.
func checkCommandLine(line string) error {
	line, ok := commandStart(line)
	if !ok {
		return fmt.Errorf("not a lloyal command line")
	}
	words, err := shellWords(line)
	if err != nil {
		return err
	}
	var args []string
	for _, w := range words[1:] {
		if w = strings.TrimSuffix(strings.TrimPrefix(w, "["), "]"); w != "" && w != "..." && w != "…" {
			args = append(args, w)
		}
	}
	return checkFrom(nil, args)
}

// checkFrom walks the subcommand path (names given so far, then args) on a
// fresh tree each time, since parsing flags changes the commands it parses.
func checkFrom(path, args []string) error {
	cmd := newRoot()
	for _, name := range path {
		next := subcommand(cmd, name)
		if next == nil {
			return fmt.Errorf("unknown command %q for %q", name, cmd.CommandPath())
		}
		cmd = next
	}
	if len(args) > 0 && cmd.HasSubCommands() && !strings.HasPrefix(args[0], "-") {
		var names []string
		if placeholder.MatchString(args[0]) && !strings.Contains(args[0], "|") {
			for _, c := range cmd.Commands() {
				names = append(names, c.Name())
			}
		} else {
			names = strings.Split(args[0], "|")
		}
		for _, name := range names {
			if err := checkFrom(append(path[:len(path):len(path)], name), args[1:]); err != nil {
				return err
			}
		}
		return nil
	}
	return checkFlags(cmd, args)
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// checkFlags parses args as cmd's flags and positional arguments. A
// placeholder value is not parsed (its flag must still exist); each
// alternative of a concrete `a|b` value must be accepted.
func checkFlags(cmd *cobra.Command, args []string) error {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	cmd.LocalFlags() // merges the parents' persistent flags into Flags()
	fs := cmd.Flags()
	var parse []string
	alternatives := map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			parse = append(parse, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if !strings.HasPrefix(a, "--") && len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f == nil {
			parse = append(parse, a) // the parser names the unknown flag
			continue
		}
		if f.NoOptDefVal != "" && !hasValue { // a bool: no separate value
			parse = append(parse, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		if placeholder.MatchString(value) {
			continue
		}
		alts := strings.Split(value, "|")
		alternatives[f.Name] = append(alternatives[f.Name], alts...)
		parse = append(parse, "--"+f.Name+"="+alts[0])
	}
	if err := cmd.ParseFlags(parse); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	for name, alts := range alternatives {
		for _, v := range alts {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("%s --%s %s: %w", cmd.CommandPath(), name, v, err)
			}
		}
	}
	return nil
}

// shellWords splits a command line as a shell would, for the quoting docs
// use: '…' and "…" hold spaces.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
