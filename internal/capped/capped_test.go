package capped

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// An answer within the bound is read whole; one byte over fails the read
// with the caller's error.
func TestReader(t *testing.T) {
	over := errors.New("over")
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {10, true}, {11, false}, {1 << 20, false}} {
		got, err := io.ReadAll(Reader(strings.NewReader(strings.Repeat("x", tc.n)), 10, over))
		if tc.ok && (err != nil || len(got) != tc.n) || !tc.ok && !errors.Is(err, over) {
			t.Errorf("%d bytes: read %d, err %v", tc.n, len(got), err)
		}
	}
}
