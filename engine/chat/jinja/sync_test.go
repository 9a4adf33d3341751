package jinja

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The upstream this package is, before patches/ (README.md). The same three
// values are in scripts/jinja-sync.sh.
const (
	upstreamModule  = "github.com/ardanlabs/jinja"
	upstreamVersion = "v1.8.0"
	upstreamSum     = "h1:NuRapYr/hv8J+4v1KymVAbbu6vuqMu+poXkJHfXqLs4="
)

// upstreamFiles are what is taken from upstream: its non-test sources and
// its licence.
var upstreamFiles = []string{"LICENSE", "ast.go", "builtins.go", "eval.go", "parse.go", "scan.go", "template.go", "value.go"}

// localFiles are this package's own, made by no patch.
var localFiles = map[string]bool{"README.md": true, "sync_test.go": true, "patches": true}

const syncFix = "regenerate the tree with scripts/jinja-sync.sh; to change a vendored file, change or add a patch (README.md)"

// TestTreeIsUpstreamPlusPatches: every file here but README.md, this test
// and patches/ is upstream (from the module cache) with patches/*.patch
// applied in order, byte for byte; a file edited without a patch fails.
func TestTreeIsUpstreamPlusPatches(t *testing.T) {
	dir := upstreamDir(t)
	want := map[string]string{}
	for _, f := range upstreamFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("upstream %s@%s: %v", upstreamModule, upstreamVersion, err)
		}
		want[f] = string(b)
	}

	series, err := filepath.Glob(filepath.Join("patches", "*.patch"))
	if err != nil || len(series) == 0 {
		t.Fatalf("no patches in patches/ (%v)", err)
	}
	named := regexp.MustCompile(`^(\d{4})-[a-z0-9][a-z0-9._-]*\.patch$`)
	for i, p := range series { // Glob sorts: the series' order
		m := named.FindStringSubmatch(filepath.Base(p))
		if m == nil {
			t.Fatalf("%s: a patch is named NNNN-short-name.patch", p)
		}
		if n, _ := strconv.Atoi(m[1]); n != i+1 {
			t.Fatalf("%s: patch number %d, want %04d (the series is numbered from 0001 without gaps)", p, n, i+1)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := applyPatch(want, string(b)); err != nil {
			t.Fatalf("%s does not apply after the patches before it: %v\n(make the series again: scripts/jinja-sync.sh workdir DIR, fix, scripts/jinja-sync.sh format DIR)", p, err)
		}
	}

	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok && !localFiles[e.Name()] {
			t.Errorf("%s is not made by upstream %s plus patches/: add it with a patch, or %s", e.Name(), upstreamVersion, syncFix)
		}
	}
	for f, w := range want {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v: %s", f, err, syncFix)
			continue
		}
		if got := string(b); got != w {
			t.Errorf("%s differs from upstream %s plus patches/ (%s): %s", f, upstreamVersion, firstDifference(w, got), syncFix)
		}
	}
}

// upstreamDir is the upstream module's directory in the module cache,
// downloaded if needed. go mod download runs outside lloyal's module, so
// go.mod and go.sum stay as they are (upstream is no build dependency); the
// test is skipped only when the module cannot be had (no go command, no
// proxy and no cached copy).
func upstreamDir(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to download %s@%s, so the check that this tree is upstream plus patches/ is skipped: %v", upstreamModule, upstreamVersion, err)
	}
	cmd := exec.Command(goCmd, "mod", "download", "-json", upstreamModule+"@"+upstreamVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, runErr := cmd.Output()
	var info struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &info); err != nil || runErr != nil || info.Error != "" || info.Dir == "" {
		msg := info.Error
		if msg == "" {
			msg = fmt.Sprint(runErr, " ", err)
		}
		t.Skipf("cannot download %s@%s, so the check that this tree is upstream plus patches/ is skipped: %s", upstreamModule, upstreamVersion, msg)
	}
	if info.Sum != upstreamSum {
		t.Fatalf("%s@%s has hash %s, want %s: not the upstream the patches were made against", upstreamModule, upstreamVersion, info.Sum, upstreamSum)
	}
	return info.Dir
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// applyPatch applies a patch as git format-patch or git diff writes it (the
// text before the first "diff --git" is its description) to files, by name,
// strictly: each hunk's context and removed lines must be at the line the
// hunk names, as they are in a series made from one commit after another.
func applyPatch(files map[string]string, patch string) error {
	lines := strings.SplitAfter(patch, "\n")
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "diff --git ") {
		i++
	}
	if i == len(lines) {
		return fmt.Errorf("no diff in the patch")
	}
	for i < len(lines) {
		if !strings.HasPrefix(lines[i], "diff --git ") {
			if strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(lines[i], "-- ") {
				break // the end, or a mail signature
			}
			return fmt.Errorf("line %d: unexpected %q", i+1, strings.TrimSpace(lines[i]))
		}
		i++
		var from, to string
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@ ") && !strings.HasPrefix(lines[i], "diff --git "); i++ {
			switch {
			case strings.HasPrefix(lines[i], "--- "):
				from = patchPath(lines[i][4:])
			case strings.HasPrefix(lines[i], "+++ "):
				to = patchPath(lines[i][4:])
			case strings.HasPrefix(lines[i], "rename ") || strings.HasPrefix(lines[i], "copy ") || strings.HasPrefix(lines[i], "Binary "):
				return fmt.Errorf("line %d: %q is not supported: keep to edits, new files and deletions", i+1, strings.TrimSpace(lines[i]))
			}
		}
		if from == "" || to == "" {
			return fmt.Errorf("line %d: a file's diff without ---/+++ lines (a mode change?)", i)
		}
		var src []string
		if from != "/dev/null" {
			text, ok := files[from]
			if !ok {
				return fmt.Errorf("%s: no such file", from)
			}
			src = strings.SplitAfter(text, "\n")
			if src[len(src)-1] == "" {
				src = src[:len(src)-1]
			}
		}
		var out []string
		pos := 0
		for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
			m := hunkHeader.FindStringSubmatch(lines[i])
			if m == nil {
				return fmt.Errorf("line %d: bad hunk header %q", i+1, strings.TrimSpace(lines[i]))
			}
			oldStart, _ := strconv.Atoi(m[1])
			oldLen, newLen := 1, 1
			if m[2] != "" {
				oldLen, _ = strconv.Atoi(m[2])
			}
			if m[4] != "" {
				newLen, _ = strconv.Atoi(m[4])
			}
			start := oldStart - 1
			if oldLen == 0 {
				start = oldStart
			}
			if start < pos || start > len(src) {
				return fmt.Errorf("%s: hunk %q is out of order or past the end", from, strings.TrimSpace(lines[i]))
			}
			out = append(out, src[pos:start]...)
			pos = start
			i++
			for oldLen > 0 || newLen > 0 {
				if i >= len(lines) || lines[i] == "" {
					return fmt.Errorf("%s: a hunk ends early", from)
				}
				l := lines[i]
				i++
				text := l[1:]
				if i < len(lines) && strings.HasPrefix(lines[i], `\`) { // \ No newline at end of file
					text = strings.TrimSuffix(text, "\n")
					i++
				}
				switch l[0] {
				case ' ', '-':
					if pos >= len(src) || src[pos] != text {
						have := "the end of the file"
						if pos < len(src) {
							have = strconv.Quote(src[pos])
						}
						return fmt.Errorf("%s line %d: the patch expects %q, the file has %s", from, pos+1, text, have)
					}
					if l[0] == ' ' {
						out = append(out, text)
						newLen--
					}
					pos++
					oldLen--
				case '+':
					out = append(out, text)
					newLen--
				default:
					return fmt.Errorf("line %d: %q in a hunk", i, strings.TrimSpace(l))
				}
				if oldLen < 0 || newLen < 0 {
					return fmt.Errorf("%s: a hunk longer than its header says", from)
				}
			}
		}
		out = append(out, src[pos:]...)
		if from != "/dev/null" && from != to {
			delete(files, from)
		}
		if to != "/dev/null" {
			files[to] = strings.Join(out, "")
		}
	}
	return nil
}

// patchPath is a ---/+++ line's file name without git's a/ or b/ (patch -p1).
func patchPath(s string) string {
	s = strings.TrimRight(s, "\n")
	if tab := strings.IndexByte(s, '\t'); tab >= 0 {
		s = s[:tab]
	}
	if s == "/dev/null" {
		return s
	}
	if _, rest, ok := strings.Cut(s, "/"); ok {
		return rest
	}
	return s
}

// firstDifference names the first line where got departs from want.
func firstDifference(want, got string) string {
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	for n := 0; n < len(w) || n < len(g); n++ {
		switch {
		case n >= len(w):
			return fmt.Sprintf("line %d: extra %q", n+1, g[n])
		case n >= len(g):
			return fmt.Sprintf("line %d: missing %q", n+1, w[n])
		case w[n] != g[n]:
			return fmt.Sprintf("line %d: want %q, have %q", n+1, w[n], g[n])
		}
	}
	return "same lines"
}
