package regular

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO with no writer, a FIFO for writing with no reader, a character
// device and a folder are refused at once, by kind; a regular file opens
// (issue #19, finding 3). A hang fails the test by its timeout.
func TestOnlyRegularFilesOpen(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.md")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	file := filepath.Join(dir, "file.md")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		flag int
		kind string
	}{
		{fifo, os.O_RDONLY, "named pipe"},
		{"/dev/zero", os.O_RDONLY, "character device"},
		{"/dev/null", os.O_WRONLY, "character device"},
		{dir, os.O_RDONLY, "directory"},
	} {
		f, err := OpenFile(c.path, c.flag, 0)
		if err == nil {
			f.Close()
			t.Fatalf("%s opened", c.path)
		}
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.kind) {
			t.Fatalf("%s: %v, want a %q refusal", c.path, err, c.kind)
		}
	}
	// For writing, a FIFO with nobody reading fails to open (ENXIO).
	if f, err := OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatal("a FIFO opened for writing")
	}
	data, err := ReadFile(file, 5)
	if err != nil || string(data) != "hello" {
		t.Fatalf("regular file: %q %v", data, err)
	}
	if _, err := ReadFile(file, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}
