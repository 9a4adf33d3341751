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
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/regular"
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
	// terms counts the chunk's words as written, stems the same words
	// stemmed: search matches stems, and gives a word written as the
	// question writes it a little more.
	terms, stems map[string]int
	length       int
	// pairs counts the chunk's adjacent content words, stemmed and
	// space-joined ("remov node"), stop words skipped: a question's words
	// found side by side are a phrase of it, not a coincidence.
	pairs map[string]int
	// heads holds the stems of the document's title and of the headings
	// the chunk falls under or holds: a passage under a heading that
	// names the question's subject is about it. headPairs holds their
	// adjacent stems, as pairs does: a heading that holds a phrase of the
	// question ("Replay and recovery after a crash") is about it more
	// than one that holds its words apart.
	heads     map[string]bool
	headPairs map[string]int
	// title is the stems of the document's title, less stop words, each
	// once (nil for a page without one): a question that names all of
	// them ("the lighthouse dashboard") is about the page "The
	// lighthouse".
	title []string
	// defines holds the terms each `term: meaning` line of the chunk
	// defines (as one space-joined string), so a search for a term ranks
	// its definition first; stemDefines holds the same terms stemmed.
	defines, stemDefines map[string]bool
}

// Corpus is a folder of text documents, read once.
type Corpus struct {
	Root   string // absolute path, or a name for a built-in corpus
	Docs   []*Doc
	Chunks []*Chunk
	// df, sdf and pdf count the chunks holding each word, stem and pair
	// of stems.
	df, sdf, pdf map[string]int
	// defined and stemDefined hold every term a chunk defines, as
	// written and stemmed: a question whose words some line defines
	// exactly is matched on them, not on their stems.
	defined, stemDefined map[string]bool
	// synonyms are the glossary's terms and the words of their meanings,
	// for query expansion.
	synonyms []synonym
	// glossary are the glossary's entries, read once at load.
	glossary []glossaryEntry
	// fields are the page fields ("applies to"): labels most pages start a
	// line with, which say what a page is about, not what it says.
	fields map[string]bool
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

// What a corpus may hold, all of it read and indexed in memory before a
// run starts: a folder past these (a home folder, a disk's root given as
// --corpus) is refused, naming the bound, instead of read for minutes.
const (
	maxCorpusEntries = 100_000 // files and folders walked
	maxCorpusFiles   = 10_000  // text files read
	maxCorpusBytes   = 64 << 20
)

// LoadCorpusFS reads every text file of fsys (a built-in corpus, say) and
// indexes it for search; name is how errors and results refer to it.
func LoadCorpusFS(fsys fs.FS, name string) (*Corpus, error) {
	return loadCorpus(fsys, nil, name)
}

func loadCorpus(fsys fs.FS, root *os.Root, name string) (*Corpus, error) {
	dir := name
	c := &Corpus{Root: name, df: map[string]int{}, sdf: map[string]int{}, pdf: map[string]int{}, defined: map[string]bool{}, stemDefined: map[string]bool{}, fsys: fsys, root: root, close: func() error { return nil }, links: map[regular.FileID]uint64{}}
	// First count the corpus's own names of each file, then read the text
	// files among them.
	var texts []string
	entries := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if entries++; entries > maxCorpusEntries {
			return fmt.Errorf("it holds more than %d files and folders: point the corpus (--corpus, or a search tool's corpus:) at the folder of the documents you mean", maxCorpusEntries)
		}
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
			if len(texts) == maxCorpusFiles {
				return fmt.Errorf("it holds more than %d .md and .txt files: point the corpus (--corpus, or a search tool's corpus:) at the folder of the documents you mean", maxCorpusFiles)
			}
			texts = append(texts, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	read := 0
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
			read += len(sc.Bytes()) + 1
		}
		f.Close()
		if read > maxCorpusBytes {
			return nil, fmt.Errorf("corpus %s: its text files hold more than %d MiB: point the corpus (--corpus, or a search tool's corpus:) at the folder of the documents you mean", dir, maxCorpusBytes>>20)
		}
		c.Docs = append(c.Docs, doc)
	}
	if len(c.Docs) == 0 {
		return nil, fmt.Errorf("corpus %s has no .md or .txt files", dir)
	}
	sort.Slice(c.Docs, func(i, j int) bool { return c.Docs[i].Path < c.Docs[j].Path })
	st := stemmer{}
	for _, d := range c.Docs {
		c.chunk(d, st)
	}
	total := 0
	for _, ch := range c.Chunks {
		total += ch.length
		countKeys(c.df, ch.terms)
		countKeys(c.sdf, ch.stems)
		countKeys(c.pdf, ch.pairs)
		for t := range ch.defines {
			c.defined[t] = true
		}
		for t := range ch.stemDefines {
			c.stemDefined[t] = true
		}
	}
	c.avgLen = float64(total) / float64(max(len(c.Chunks), 1))
	c.fields = pageFields(c.Docs)
	c.glossary = glossaryEntries(c.Docs, c.fields)
	c.synonyms = synonyms(c.glossary, st)
	return c, nil
}

// countKeys adds one to df for each key of a chunk's map.
func countKeys(df, m map[string]int) {
	for t := range m {
		df[t]++
	}
}

// stemmer stems words, remembering each: a corpus repeats its words, and
// indexing it stems each once.
type stemmer map[string]string

// stem is the word's stem.
func (st stemmer) stem(w string) string {
	s, ok := st[w]
	if !ok {
		s = stem(w)
		st[w] = s
	}
	return s
}

// stems are the stems of words.
func (st stemmer) stems(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = st.stem(w)
	}
	return out
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
func (c *Corpus) chunk(d *Doc, st stemmer) {
	start := 0
	title, heads, code := outline(d.Lines)
	// The term each line defines, if any, worked out once per line. A
	// `key: value` line of a code block is configuration, not a
	// definition.
	defs := make([]string, len(d.Lines))
	for i, l := range d.Lines {
		if !code[i] {
			defs[i] = defines(l)
		}
	}
	flush := func(end int) {
		for start < end && strings.TrimSpace(d.Lines[start]) == "" {
			start++
		}
		if start >= end {
			return
		}
		c.Chunks = append(c.Chunks, newChunk(d, start, end, defs[start:end], code[start:end], title, heads, st))
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

// newChunk indexes lines [start, end) of d, which define defs and of
// which code are in a code block; title is the document's title line (-1
// for none) and heads its other headings, by line (-1 before the first).
func newChunk(d *Doc, start, end int, defs []string, code []bool, title int, heads []int, st stemmer) *Chunk {
	ch := &Chunk{Doc: d, Start: start + 1, End: end, Text: strings.Join(d.Lines[start:end], "\n"),
		terms: map[string]int{}, stems: map[string]int{}, pairs: map[string]int{}, heads: map[string]bool{}, headPairs: map[string]int{}}
	for _, def := range defs {
		if def != "" {
			if ch.defines == nil {
				ch.defines, ch.stemDefines = map[string]bool{}, map[string]bool{}
			}
			ch.defines[def] = true
			ch.stemDefines[strings.Join(st.stems(strings.Fields(def)), " ")] = true
		}
	}
	// The title and the heading in force where the chunk starts (a chunk
	// that opens with its own heading names it in its text already).
	var context []string
	if title >= 0 && title < start {
		context = append(context, headingText(d.Lines[title]))
	}
	if h := heads[start]; h >= 0 && !strings.HasPrefix(strings.TrimSpace(d.Lines[start]), "#") {
		context = append(context, headingText(d.Lines[h]))
	}
	words, ctx := terms(ch.Text), terms(strings.Join(context, " "))
	for _, w := range append(words, ctx...) {
		ch.terms[w]++
		ch.stems[st.stem(w)]++
		ch.length++
	}
	for _, p := range phrases(d.Lines[start:end], code) {
		addPairs(ch.pairs, p, st)
	}
	addPairs(ch.pairs, ctx, st)
	// What the chunk is under, for the heading boost: the page's title,
	// and every heading from the one in force at its start to its end,
	// each its own phrase.
	var under []string
	if title >= 0 {
		under = append(under, headingText(d.Lines[title]))
		for _, w := range terms(under[0]) {
			if s := st.stem(w); !stopWords[w] && !slices.Contains(ch.title, s) {
				ch.title = append(ch.title, s)
			}
		}
	}
	for i := start; i < end; i++ {
		if h := heads[i]; h >= 0 && (i == start || h == i) {
			under = append(under, headingText(d.Lines[h]))
		}
	}
	for _, u := range under {
		words := terms(u)
		for _, w := range words {
			if !stopWords[w] {
				ch.heads[st.stem(w)] = true
			}
		}
		addPairs(ch.headPairs, words, st)
	}
	return ch
}

// phrases are the words of lines in runs whose adjacent words are side by
// side: a sentence, a heading, a list item, a table cell or a line of a
// code block (a command each). Prose wraps mid-sentence, so its line ends
// are no boundary; a blank line, a sentence's end (". ", ";", "?", "!"), a
// table's cell border and a line that opens a heading, an item or a code
// block are. "hello-harbor" at the end of one command and "tidewater" at
// the start of the next are not the phrase "harbor in Tidewater".
func phrases(lines []string, code []bool) [][]string {
	var out [][]string
	var run []string
	end := func() {
		if len(run) > 0 {
			out = append(out, run)
			run = nil
		}
	}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || code[i] || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || startsNumbered(t) {
			end()
		}
		for j, sentence := range sentenceEnd.Split(l, -1) {
			if j > 0 {
				end()
			}
			run = append(run, terms(sentence)...)
		}
		if code[i] {
			end()
		}
	}
	end()
	return out
}

// sentenceEnd is where a sentence or clause ends inside a line: a full
// stop, question or exclamation mark before a space or the line's end
// (not the dot of "2.6" or "tidewater.yaml"), closing marks between
// ("job?**", "JOB`."), a semicolon, or a table's cell border.
var sentenceEnd = regexp.MustCompile("[.?!][*_`'\")\\]]*(\\s|$)|[;|]")

// startsNumbered reports whether a line opens a numbered item ("3. ").
func startsNumbered(l string) bool {
	i := 0
	for i < len(l) && l[i] >= '0' && l[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(l[i:], ". ")
}

// addPairs counts each two adjacent words of words that are not stop
// words, stemmed, into pairs.
func addPairs(pairs map[string]int, words []string, st stemmer) {
	prev := ""
	for _, w := range words {
		if stopWords[w] {
			continue
		}
		s := st.stem(w)
		if prev != "" {
			pairs[prev+" "+s]++
		}
		prev = s
	}
}

// outline finds a document's Markdown headings and code blocks: title is
// the line of its first level-one heading (-1 for none), heads[i] the line
// of the last other heading at or before line i (-1 before the first), and
// code[i] whether line i is in a fenced code block, fences included (a
// shell comment in a code block is no heading).
func outline(lines []string) (title int, heads []int, code []bool) {
	title, last, fenced := -1, -1, false
	heads, code = make([]int, len(lines)), make([]bool, len(lines))
	for i, l := range lines {
		l = strings.TrimSpace(l)
		fence := strings.HasPrefix(l, "```")
		if fence {
			fenced = !fenced
		}
		code[i] = fenced || fence
		text := strings.TrimLeft(l, "#")
		if !fenced && text != l && strings.HasPrefix(text, " ") {
			if len(l)-len(text) == 1 && title < 0 {
				title = i
			} else {
				last = i
			}
		}
		heads[i] = last
	}
	return title, heads, code
}

// headingText is a heading line's text, without its #s.
func headingText(line string) string {
	return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
}

// defines is the term a `term: meaning` line (a glossary's shape) defines,
// its words joined by one space, or "" for any other line. A bulleted
// `- Key: value` line is a field of a record (an error code's "Meaning:"),
// not a definition, and a colon inside inline code ("`lease: 45m`.",
// wrapped onto a line of its own) is a setting's value.
func defines(line string) string {
	l := strings.TrimSpace(line)
	term, _, ok := strings.Cut(l, ": ")
	if !ok || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "-") || strings.HasPrefix(l, "*") || strings.Count(term, "`")%2 == 1 {
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
