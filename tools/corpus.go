// Package tools holds lloyal's built-in tools: search (BM25), read_file,
// grep, glossary, write_note (protected), delegate and report, over a local
// corpus of text files. Their names, descriptions and schemas are prompts:
// the model reads them word for word.
package tools

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/regular"
)

// Doc is one file of the corpus.
type Doc struct {
	Path  string // relative to the corpus root, with forward slashes
	Lines []string
}

// Chunk is a run of lines of one document: the unit search ranks.
type Chunk struct {
	Doc        *Doc
	Start, End int // 1-based, inclusive
	Text       string
	terms      map[string]int
	length     int
	// defines holds the terms each `term: meaning` line of the chunk
	// defines (as one space-joined string), so a search for a term ranks
	// its definition first.
	defines map[string]bool
}

// Corpus is a folder of text documents, read once.
type Corpus struct {
	Root   string // absolute path, or a name for a built-in corpus
	Docs   []*Doc
	Chunks []*Chunk
	df     map[string]int
	avgLen float64
	fsys   fs.FS
	root   *os.Root // the folder, when the corpus is one (nil for a built-in corpus)
	close  func() error
	// links counts the corpus's own names (outside restricted/) for each
	// file: a file with more hard links than that also lives outside the
	// corpus, or in its restricted/ folder, and is not served.
	links map[regular.FileID]uint64
}

// Restricted is the top-level folder of a corpus that is off limits: its
// files are neither indexed nor read (read_file and grep refuse them).
const Restricted = "restricted"

// restricted reports whether a corpus path is in the off-limits folder.
func restricted(p string) bool {
	return p == Restricted || strings.HasPrefix(p, Restricted+"/")
}

// Extensions read as text.
var textExt = map[string]bool{".md": true, ".txt": true, ".rst": true, ".org": true}

// LoadCorpus reads every text file under dir (symlinks are not followed out
// of it) and indexes it for search.
func LoadCorpus(dir string) (*Corpus, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w (pass --corpus DIR, a folder of .md or .txt files)", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("corpus %s is not a folder: pass --corpus DIR, a folder of .md or .txt files", dir)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	// os.Root's FS refuses "..", absolute paths and symlinks that lead out
	// of the folder, even one swapped in during a call.
	c, err := loadCorpus(root.FS(), root, abs)
	if err != nil {
		root.Close()
		return nil, err
	}
	c.close = root.Close
	return c, nil
}

// maxDoc is the largest file the corpus reads (a text document, not a
// disk image): what is past it is left out.
const maxDoc = 16 << 20

// LoadCorpusFS reads every text file of fsys (a built-in corpus, say) and
// indexes it for search; name is how errors and results refer to it.
func LoadCorpusFS(fsys fs.FS, name string) (*Corpus, error) {
	return loadCorpus(fsys, nil, name)
}

func loadCorpus(fsys fs.FS, root *os.Root, name string) (*Corpus, error) {
	dir := name
	c := &Corpus{Root: name, df: map[string]int{}, fsys: fsys, root: root, close: func() error { return nil }, links: map[regular.FileID]uint64{}}
	// First count the corpus's own names of each file, then read the text
	// files among them.
	var texts []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		if d.IsDir() && restricted(p) {
			return fs.SkipDir // off limits: not indexed, not searchable
		}
		if !d.Type().IsRegular() { // folders, symlinks, FIFOs, devices
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if id, _, ok := regular.Links(fi); ok {
				c.links[id]++
			}
		}
		if textExt[strings.ToLower(filepath.Ext(p))] {
			texts = append(texts, p)
		}
		return nil
	})
	for _, p := range texts {
		f, err := c.open(p)
		if err != nil {
			continue // not a regular file (any more), or linked from outside
		}
		doc := &Doc{Path: filepath.ToSlash(p)}
		sc := bufio.NewScanner(io.LimitReader(f, maxDoc))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			doc.Lines = append(doc.Lines, sc.Text())
		}
		f.Close()
		c.Docs = append(c.Docs, doc)
	}
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	if len(c.Docs) == 0 {
		return nil, fmt.Errorf("corpus %s has no .md or .txt files", dir)
	}
	sort.Slice(c.Docs, func(i, j int) bool { return c.Docs[i].Path < c.Docs[j].Path })
	for _, d := range c.Docs {
		c.chunk(d)
	}
	total := 0
	for _, ch := range c.Chunks {
		total += ch.length
		for t := range ch.terms {
			c.df[t]++
		}
	}
	c.avgLen = float64(total) / float64(max(len(c.Chunks), 1))
	return c, nil
}

// errOutsideLinks refuses a file that also has a name outside the corpus.
var errOutsideLinks = errors.New("the file has hard links outside the corpus: it is not served")

// open opens a corpus file for reading: a regular file only, opened
// without blocking (a FIFO or a device is refused, not waited on), and only
// one whose every hard link is a name in the corpus: a link to a file
// outside would pass the folder's confinement.
func (c *Corpus) open(name string) (fs.File, error) {
	var f fs.File
	var err error
	if c.root != nil {
		f, err = regular.OpenIn(c.root, name, os.O_RDONLY, 0)
	} else if f, err = c.fsys.Open(name); err == nil {
		err = regular.Check(f, name)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if id, n, ok := regular.Links(st); ok && n > 1 && n > c.links[id] {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errOutsideLinks}
	}
	return f, nil
}

// Close releases the corpus folder handle.
func (c *Corpus) Close() error { return c.close() }

// chunk splits a document at blank lines into chunks of about 8 lines.
// A chunk's terms include the document's title and the heading it falls
// under, once each: a passage under "## Changed" of "Tidewater 2.6 release
// notes" is about both, though its own lines may name neither.
func (c *Corpus) chunk(d *Doc) {
	start := 0
	// The term each line defines, if any, worked out once per line.
	defs := make([]string, len(d.Lines))
	for i, l := range d.Lines {
		defs[i] = defines(l)
	}
	title, heading, fenced := "", "", false
	headingAt := func(i int) {
		l := strings.TrimSpace(d.Lines[i])
		if strings.HasPrefix(l, "```") {
			fenced = !fenced // a shell comment in a code block is no heading
		}
		text := strings.TrimLeft(l, "#")
		if fenced || text == l || !strings.HasPrefix(text, " ") {
			return
		}
		if len(l)-len(text) == 1 && title == "" {
			title = strings.TrimSpace(text)
		} else {
			heading = strings.TrimSpace(text)
		}
	}
	flush := func(end int) {
		for start < end && strings.TrimSpace(d.Lines[start]) == "" {
			start++
		}
		if start >= end {
			return
		}
		text := strings.Join(d.Lines[start:end], "\n")
		ch := &Chunk{Doc: d, Start: start + 1, End: end, Text: text, terms: map[string]int{}}
		for _, def := range defs[start:end] {
			if def != "" {
				if ch.defines == nil {
					ch.defines = map[string]bool{}
				}
				ch.defines[def] = true
			}
		}
		// The heading in force where the chunk starts (a chunk that opens
		// with its own heading names it in its text already).
		context := title
		if heading != "" && !strings.HasPrefix(strings.TrimSpace(d.Lines[start]), "#") {
			context += " " + heading
		}
		for _, t := range append(terms(text), terms(context)...) {
			ch.terms[t]++
			ch.length++
		}
		c.Chunks = append(c.Chunks, ch)
		for i := start; i < end; i++ {
			headingAt(i)
		}
		start = end
	}
	for i, l := range d.Lines {
		// A glossary's `term: meaning` lines are a chunk each, so a
		// definition is not diluted by eleven others around it.
		if defs[i] != "" && (i > 0 && defs[i-1] != "" || i+1 < len(defs) && defs[i+1] != "") {
			flush(i)
			flush(i + 1)
			continue
		}
		if strings.TrimSpace(l) == "" && i-start >= 4 {
			flush(i)
		} else if i-start >= 12 {
			flush(i)
		}
	}
	flush(len(d.Lines))
}

// defines is the term a `term: meaning` line (a glossary's shape) defines,
// its words joined by one space, or "" for any other line. A bulleted
// `- Key: value` line is a field of a record (an error code's "Meaning:"),
// not a definition.
func defines(line string) string {
	l := strings.TrimSpace(line)
	term, _, ok := strings.Cut(l, ": ")
	if !ok || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "-") || strings.HasPrefix(l, "*") {
		return ""
	}
	if w := terms(term); len(w) > 0 && len(w) <= 4 {
		return strings.Join(w, " ")
	}
	return ""
}

// terms lowercases text and splits it into words. A dot between two
// digits stays inside the word, so a version ("2.6") is one term rather
// than two digits that every page holds.
func terms(s string) []string {
	s = strings.ToLower(s)
	word := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 || r == '_' }
	digit := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	var out []string
	start := -1
	for i, r := range s {
		in := word(r) || r == '.' && digit(i-1) && digit(i+1)
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			out = append(out, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}
