// Package capped reads an answer to a bound and fails past it: a server's
// answer longer than lloyal takes is an error that says so, where a cut
// one would read as malformed JSON and an uncut one could be any size.
package capped

import "io"

// reader is Reader's: left counts down from the limit and one byte more.
type reader struct {
	r    io.Reader
	left int64
	over error
}

// Reader gives r's bytes while they are at most limit, and over once r
// has more (the byte past the limit is given, the read after it fails).
func Reader(r io.Reader, limit int64, over error) io.Reader {
	return &reader{r: r, left: limit + 1, over: over}
}

func (c *reader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.over
	}
	n, err := c.r.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	return n, err
}
